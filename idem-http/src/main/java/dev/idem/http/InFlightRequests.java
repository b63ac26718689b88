package dev.idem.http;

import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The fingerprints of the guarded requests this filter is running now, by key: how a copy that
 * timed out waiting on a key tells "the same request, still running" (409) from "another request
 * under a key in use" (422).
 *
 * <p>Why it exists: the executor claims a key with an insert that commits with the handler's
 * writes, so while the first request runs its row (and fingerprint) is invisible to every other
 * transaction. A copy blocks on that row; if the first commits within the wait, the copy reads its
 * fingerprint and gets {@code KeyReuseException}; if not, the engine can only answer in flight. In
 * this process the filter knows the running request's fingerprint, and answers 422 first. A copy
 * that reaches another process still gets 409 until the first commits, then 422; see docs/http.md.
 */
final class InFlightRequests {
  private final ConcurrentHashMap<IdempotencyKey, Holder> running = new ConcurrentHashMap<>();

  /** A guarded request under {@code key}; it counts as running only once it {@link Holder#holds()} the key. */
  Holder request(IdempotencyKey key, Fingerprint fingerprint) {
    return new Holder(key, fingerprint);
  }

  /** Whether the request holding {@code key} here has another fingerprint than {@code fingerprint}. */
  boolean runsAnother(IdempotencyKey key, Fingerprint fingerprint) {
    Holder holder = running.get(key);
    return holder != null && !holder.fingerprint.equals(fingerprint);
  }

  /**
   * One request. Only the copy whose claim succeeded (its handler runs) is registered, so a copy
   * that merely waits is never taken for the running one. Equal by identity: a holder removes only
   * itself.
   */
  final class Holder implements AutoCloseable {
    private final IdempotencyKey key;
    private final Fingerprint fingerprint;

    private Holder(IdempotencyKey key, Fingerprint fingerprint) {
      this.key = key;
      this.fingerprint = fingerprint;
    }

    /** Called from the effect: this request holds the key's claim and its handler is running. */
    void holds() {
      running.put(key, this);
    }

    /** The request has its answer (committed or rolled back). */
    @Override
    public void close() {
      running.remove(key, this);
    }
  }
}
