package dev.idem.event;

import dev.idem.key.IdempotencyKey;
import java.time.Duration;

/**
 * Something a guard did, for metrics and logs. Every event names the {@code source}, the tool and
 * hop it came from (e.g. {@code "executor"}, {@code "inbox:billing"}), so repeats can be counted
 * per hop, as the seed asks: a jump means something upstream started retrying.
 *
 * <p>Events are built only when a listener is registered.
 */
public sealed interface IdemEvent {

  /** The tool and hop that emitted the event. */
  String source();

  /** The effect ran for {@code key} and was committed with its record. */
  record Applied(String source, IdempotencyKey key) implements IdemEvent {}

  /**
   * A repeat of {@code key} was recognised and absorbed. {@code windowUsed} is its age over the
   * dedupe window: repeats near 1.0 predict repeats past the window.
   */
  record Replayed(String source, IdempotencyKey key, Duration age, double windowUsed) implements IdemEvent {}

  /** A copy of {@code key} found another copy running and was told to retry after {@code retryAfter}. */
  record InFlight(String source, IdempotencyKey key, Duration retryAfter) implements IdemEvent {}

  /** {@code key} came back with a different request and was refused. A rising rate means a client reuses keys. */
  record FingerprintMismatch(String source, IdempotencyKey key) implements IdemEvent {}

  /** A lease on {@code key} had ended and was taken over with a higher fencing token. */
  record LeaseTakenOver(String source, IdempotencyKey key, long previousToken, long newToken) implements IdemEvent {}

  /** {@code count} records past their window were deleted; a repeat of one of them would run again. */
  record Expired(String source, long count) implements IdemEvent {}
}
