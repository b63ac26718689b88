package dev.idem.jdbc.lease;

import dev.idem.fence.FencingToken;
import dev.idem.fence.StaleFenceException;
import dev.idem.jdbc.tx.TxCallback;
import java.sql.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;

/**
 * One grant of a lease on a resource, to one holder, with the fencing token of that grant. Got from
 * {@link Leases#acquire}.
 *
 * <p>Guarantees: {@link #token()} is greater than the token of every earlier grant on the resource.
 * While this lease has not ended (by the database clock) no one else is granted the resource.
 *
 * <p>Does not guarantee that you still hold it: a lease ends when its time runs out, whether or not
 * your process noticed (a long GC pause, a slow call). So its expiry (database clock) is not
 * offered to compare with your own clock; protect writes with the token instead ({@link #fenced},
 * {@link Leases#checkFence}), which the store checks.
 *
 * <p>Thread-safe.
 */
public final class Lease {
  private final Leases leases;
  private final String resource;
  private final String holder;
  private final FencingToken token;
  private final String previousHolder;
  private volatile Instant expiresAt;

  Lease(Leases leases, String resource, String holder, FencingToken token, Instant expiresAt, String previousHolder) {
    this.leases = leases;
    this.resource = resource;
    this.holder = holder;
    this.token = token;
    this.expiresAt = expiresAt;
    this.previousHolder = previousHolder;
  }

  /** The resource this grant is on. */
  String resource() {
    return resource;
  }

  /** Who was granted it. */
  String holder() {
    return holder;
  }

  /** The fencing token of this grant; send it with every write made under the lease. */
  public FencingToken token() {
    return token;
  }

  /** When the lease ends by the database clock, as of the grant or the last successful renewal. */
  Instant expiresAt() {
    return expiresAt;
  }

  /** Whether this grant took the resource over from a holder whose lease had ended. */
  public boolean tookOver() {
    return previousHolder != null;
  }

  /** The holder this grant took over from, if it took over ({@link #tookOver()}). */
  public Optional<String> previousHolder() {
    return Optional.ofNullable(previousHolder);
  }

  /**
   * Extends the lease to {@code ttl} from now (database clock), if it has not ended.
   *
   * @return true if renewed; false if the lease had ended (its time ran out, it was released or
   *     someone else was granted it): acquire again, and get a new token
   */
  public boolean renew(Duration ttl) {
    Optional<Instant> renewed = leases.renewUntil(resource, holder, token, ttl);
    renewed.ifPresent(at -> expiresAt = at);
    return renewed.isPresent();
  }

  /**
   * Gives the resource up before its time, so the next {@link Leases#acquire} is granted at once
   * (with a higher token). The lease row stays, so tokens keep growing.
   *
   * @return true if this grant was still the latest and is now released; false if someone else
   *     has been granted the resource since (nothing changed)
   */
  public boolean release() {
    return leases.release(resource, holder, token);
  }

  /**
   * Runs {@code write} in a transaction (joining the one open on this thread) after checking this
   * lease's token against the resource's latest grant ({@link Leases#checkFence}); the check holds
   * until the transaction ends, so no new grant can slip between it and the commit.
   *
   * @throws StaleFenceException if a later grant exists; {@code write} did not run
   */
  public <T, X extends Exception> T fenced(TxCallback<T, X> write) throws X {
    return leases.fenced(resource, token, write);
  }

  /**
   * {@link #fenced(TxCallback)} in the caller's transaction on {@code tx}; see {@link
   * Leases#fenced(Connection, String, FencingToken, TxCallback)}.
   */
  public <T, X extends Exception> T fenced(Connection tx, TxCallback<T, X> write) throws X {
    return leases.fenced(tx, resource, token, write);
  }

  @Override
  public String toString() {
    return "Lease[" + resource + " held by " + holder + ", token " + token.value() + ", until " + expiresAt + "]";
  }
}
