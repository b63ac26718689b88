package dev.idem.jdbc.notify;

import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.key.IdempotencyKey;
import java.time.Duration;

/**
 * At most {@code limit} sends per recipient within any {@code per} (a sliding window, database
 * clock): "at most 3 transactional emails per order per hour" is {@code new Cap("transactional-email",
 * 3, Duration.ofHours(1))}. It bounds a retry storm; it does not dedupe (the claim does).
 *
 * <p>Message types that name the same cap count together (every transactional email of an order);
 * they must then give it the same limit and window.
 *
 * @param name what the count is kept under, checked like an idempotency key (visible ASCII, 1 to 255)
 * @param limit sends allowed per recipient within {@code per}, 1 or more
 * @param per the window, from 1 ms to 100 years
 */
public record Cap(String name, int limit, Duration per) {
  /** @throws IllegalArgumentException naming the bad argument */
  public Cap {
    IdempotencyKey.check("cap name", name);
    Require.positive(limit, "limit");
    DbTime.bounded(Require.positive(per, "per"), "per");
  }
}
