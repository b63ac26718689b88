package dev.idem.spring.boot;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * The last fingerprint mismatches this instance refused (keys that came back with another request:
 * the HTTP 422s), newest first, for the {@code idem} actuator endpoint. Kept in memory, per
 * instance, the last {@value #CAPACITY}; nothing survives a restart and other instances keep their
 * own. The meter {@code idem.fingerprint.mismatches} counts them all.
 */
final class RecentMismatches implements IdemListener {
  static final int CAPACITY = 100;

  /** One refusal: when this instance saw it (its clock: for reading, decides nothing), where, which key. */
  record Mismatch(Instant at, String source, String scope, String key) {}

  private final ArrayDeque<Mismatch> last = new ArrayDeque<>(CAPACITY);

  @Override
  public synchronized void onFingerprintMismatch(IdemEvent.FingerprintMismatch event) {
    if (last.size() == CAPACITY) {
      last.removeLast();
    }
    last.addFirst(new Mismatch(Instant.now(), event.source(), event.key().scope(), event.key().value()));
  }

  /** Newest first. */
  synchronized List<Mismatch> list() {
    return new ArrayList<>(last);
  }
}
