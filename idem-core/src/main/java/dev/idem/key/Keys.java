package dev.idem.key;

import dev.idem.internal.Sha256;
import java.time.Instant;
import java.time.temporal.ChronoUnit;

/**
 * Derives the key of every later hop from the key made where the intent started, so that any
 * retry, on any machine, after any crash, computes the same key without storing it first.
 *
 * <ul>
 *   <li>{@link #child}: one step of an intent ({@code order}, {@code payment}, {@code
 *       email/receipt}). Same parent and step give the same key; different steps never share one.
 *   <li>{@link #attempt}: a call to a third party. A retry of attempt 1 reuses attempt 1's key; a
 *       new attempt (the buyer picked another card after a decline) is a deliberate new operation
 *       and gets a new key, or the provider would replay the decline forever.
 *   <li>{@link #scheduledRun}: a periodic job. The key names the slot the run belongs to, never the
 *       clock when it started, so two replicas that both fire the 02:00 run produce one key.
 * </ul>
 *
 * <h2>Why there is no helper that keys an action by its content</h2>
 *
 * A content hash ({@code sha256(user, amount, merchant)}) is right for content: two identical file
 * blocks really are one block. For an action it is a bug: a buyer who orders the same $4.50 coffee
 * twice in ten minutes made two purchases with identical content, and the second would be swallowed
 * as a "duplicate" &mdash; a silent lost sale. Content belongs in a {@link Fingerprint}, which
 * checks that a key is not reused for a different request; the key itself must name the intent.
 */
public final class Keys {
  private Keys() {}

  /**
   * The key of one step of the parent's intent: the same scope, and as value the SHA-256 (hex) of
   * {@code parent.value() + "/" + step}.
   *
   * @throws IllegalArgumentException if {@code parent} is null or {@code step} is null, blank or
   *     not visible ASCII
   */
  public static IdempotencyKey child(IdempotencyKey parent, String step) {
    if (parent == null) {
      throw new IllegalArgumentException("parent must not be null");
    }
    IdempotencyKey.check("step", step);
    return new IdempotencyKey(parent.scope(), Sha256.hex(parent.value() + "/" + step));
  }

  /**
   * The key for attempt {@code n} (1, 2, ...) of a call to a third party: {@code child(parent,
   * "attempt/" + n)}.
   *
   * @throws IllegalArgumentException if {@code n < 1}
   */
  public static IdempotencyKey attempt(IdempotencyKey parent, int n) {
    if (n < 1) {
      throw new IllegalArgumentException("attempt must be 1 or more, was " + n);
    }
    return child(parent, "attempt/" + n);
  }

  /**
   * The key of the run of {@code job} due at {@code slot}: {@code job + "@" + slot} with the slot
   * in ISO-8601 UTC, truncated to seconds. Pass the slot the scheduler computed from the schedule
   * (02:00:00), never {@code Instant.now()} at start: two replicas that started at 02:00:00.4 and
   * 02:00:03 must still produce one key.
   *
   * @throws IllegalArgumentException if {@code slot} has a fraction of a second, which is the mark
   *     of a clock reading rather than a slot
   */
  public static IdempotencyKey scheduledRun(String scope, String job, Instant slot) {
    IdempotencyKey.check("job", job);
    if (slot == null) {
      throw new IllegalArgumentException("slot must not be null");
    }
    if (!slot.truncatedTo(ChronoUnit.SECONDS).equals(slot)) {
      throw new IllegalArgumentException(
          "slot " + slot + " has a fraction of a second: pass the slot from the schedule, not the"
              + " clock when the run started");
    }
    return new IdempotencyKey(scope, job + "@" + slot);
  }
}
