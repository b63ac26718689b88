package dev.idem.fence;

import dev.idem.key.IdempotencyKey;

/**
 * The highest fencing token a resource has seen, kept in memory. {@link #check} admits a token at
 * or above the highest and raises the highest to it; it refuses a lower one with {@link
 * StaleFenceException}. Thread-safe.
 *
 * <p>Does not guarantee anything across processes: a resource shared by several machines must keep
 * its highest token in the store it writes to (see {@code dev.idem.jdbc}'s fenced writes). This
 * class is for resources owned by one process and for tests of the rule.
 */
public final class Fence {
  private final String resource;
  private long highest;

  /**
   * A fence for {@code resource} that has seen no token yet.
   *
   * @throws IllegalArgumentException if {@code resource} breaks the rules of {@link IdempotencyKey#check}
   */
  public Fence(String resource) {
    this.resource = IdempotencyKey.check("resource", resource);
  }

  /**
   * Admits {@code token} if it is at least the highest seen, and remembers it.
   *
   * @throws StaleFenceException if a higher token was seen before; nothing is remembered
   */
  public synchronized void check(FencingToken token) {
    if (token == null) {
      throw new IllegalArgumentException("token must not be null");
    }
    if (!token.admits(highest)) {
      throw new StaleFenceException(resource, token.value(), highest);
    }
    highest = token.value();
  }

  /** The highest token admitted so far, or 0 if none. */
  public synchronized long highest() {
    return highest;
  }
}
