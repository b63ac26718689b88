package dev.idem.http;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.key.IdempotencyKey;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The events of the answers the filter decides itself, without asking the executor: a copy that
 * waited in this process and was refused as another request (422) or answered in flight (409).
 * Counted as the executor counts the same answers ({@code FingerprintMismatch}, {@code InFlight}),
 * under the executor's name, so a key-reuse alert sees them.
 *
 * <p>They go to the {@code Idem}'s own listener ({@code Idem.listener()}), the one its executor
 * reports to, so nothing has to be configured twice.
 */
final class FilterEvents {
  private static final Logger LOG = LoggerFactory.getLogger(FilterEvents.class);

  private final IdemListener listener;
  private final String source;

  FilterEvents(IdemListener listener, String source) {
    this.listener = listener;
    this.source = source;
  }

  void fingerprintMismatch(IdempotencyKey key) {
    if (listener != IdemListener.NONE) {
      deliver(() -> listener.onFingerprintMismatch(new IdemEvent.FingerprintMismatch(source, key)));
    }
  }

  void inFlight(IdempotencyKey key, Duration retryAfter) {
    if (listener != IdemListener.NONE) {
      deliver(() -> listener.onInFlight(new IdemEvent.InFlight(source, key, retryAfter)));
    }
  }

  /** A listener's failure never changes the answer, as with idem's own events. */
  private void deliver(Runnable delivery) {
    try {
      delivery.run();
    } catch (RuntimeException e) {
      LOG.warn("idem listener {} failed on an event of {}", listener, source, e);
    }
  }
}
