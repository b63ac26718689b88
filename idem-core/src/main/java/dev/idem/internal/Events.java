package dev.idem.internal;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.key.IdempotencyKey;
import dev.idem.transition.Outcome;
import dev.idem.window.DedupeWindow;
import java.time.Duration;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.UUID;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * How idem's guards emit events. With no listener it is a do-nothing object, so the hot path
 * builds no event; with one, each event is delivered and a listener's exception is logged (logger
 * {@code dev.idem.events}, WARNING), never thrown into the call. A {@link VirtualMachineError}
 * other than a stack overflow (out of memory) is the one thing passed on ({@link Failures}). Not
 * an API.
 */
public interface Events {

  Events NONE = new Events() {};

  static Events to(IdemListener listener, String source) {
    if (listener == null || listener == IdemListener.NONE) {
      return NONE;
    }
    return new Delivering(listener, source);
  }

  default void applied(IdempotencyKey key) {}

  default void replayed(IdempotencyKey key, Duration age, DedupeWindow window) {}

  default void inFlight(IdempotencyKey key, Duration retryAfter) {}

  default void fingerprintMismatch(IdempotencyKey key) {}

  default void leaseTakenOver(IdempotencyKey key, long previousToken, long newToken) {}

  default void expired(long count) {}

  /**
   * The outcome of a conditional write on {@code table}: a step {@code from → to}, or an edit when
   * both are null. {@code id} is turned into text only when an event is built.
   */
  default void transition(String table, Object id, String from, String to, Outcome outcome, boolean rowFound,
      Optional<String> state, OptionalLong version) {}

  default void staleFence(String resource, long token, long highest) {}

  /** {@code seq} for {@code (stream, entity)} was applied ({@code Applied}) or not newer ({@code SequenceIgnored}). */
  default void sequence(String stream, String entity, long seq, Outcome outcome) {}

  default void published(UUID id, String topic, int attempt, Duration publishTime) {}

  default void publishFailed(UUID id, String topic, int attempt, boolean parked, String error) {}

  default void operatorAction(String action, String target, long rows) {}

  /** Delivers to one listener; see {@link Events}. */
  final class Delivering implements Events {
    private static final System.Logger LOG = System.getLogger("dev.idem.events");

    private final IdemListener listener;
    private final String source;

    Delivering(IdemListener listener, String source) {
      this.listener = listener;
      this.source = source;
    }

    // The event is built inside the guard too: a failure while building it (a bad age from a
    // store) must not break the call any more than a failing listener may.
    private <E extends IdemEvent> void deliver(Supplier<E> build, Consumer<E> method) {
      E event = null;
      try {
        event = build.get();
        method.accept(event);
      } catch (Throwable e) { // also a checked exception thrown by a listener in Kotlin or with @SneakyThrows
        Failures.rethrowIfFatal(e);
        if (e instanceof InterruptedException) {
          Thread.currentThread().interrupt(); // swallowed, but the thread must still know it was asked to stop
        }
        LOG.log(System.Logger.Level.WARNING, "idem listener " + describe(listener) + " failed on "
            + (event == null ? "an event from " + source : describe(event)) + "; the call goes on", e);
      }
    }

    /** {@code toString()} of a listener or event, which must not fail the call either. */
    private static String describe(Object o) {
      try {
        return String.valueOf(o);
      } catch (Throwable e) {
        Failures.rethrowIfFatal(e);
        return o.getClass().getName() + " (its toString failed: " + e + ")";
      }
    }

    @Override
    public void applied(IdempotencyKey key) {
      deliver(() -> new IdemEvent.Applied(source, key), listener::onApplied);
    }

    @Override
    public void replayed(IdempotencyKey key, Duration age, DedupeWindow window) {
      deliver(() -> {
        // A store clock that steps back can make an age negative; count it as a fresh repeat.
        Duration clamped = age == null || age.isNegative() ? Duration.ZERO : age;
        double used = window == null ? 0 : window.fractionUsed(clamped);
        return new IdemEvent.Replayed(source, key, clamped, used);
      }, listener::onReplayed);
    }

    @Override
    public void inFlight(IdempotencyKey key, Duration retryAfter) {
      deliver(() -> new IdemEvent.InFlight(source, key, retryAfter), listener::onInFlight);
    }

    @Override
    public void fingerprintMismatch(IdempotencyKey key) {
      deliver(() -> new IdemEvent.FingerprintMismatch(source, key), listener::onFingerprintMismatch);
    }

    @Override
    public void leaseTakenOver(IdempotencyKey key, long previousToken, long newToken) {
      deliver(() -> new IdemEvent.LeaseTakenOver(source, key, previousToken, newToken), listener::onLeaseTakenOver);
    }

    @Override
    public void expired(long count) {
      deliver(() -> new IdemEvent.Expired(source, count), listener::onExpired);
    }

    @Override
    public void transition(String table, Object id, String from, String to, Outcome outcome, boolean rowFound,
        Optional<String> state, OptionalLong version) {
      deliver(() -> new IdemEvent.Transition(source, table, String.valueOf(id), Optional.ofNullable(from),
          Optional.ofNullable(to), outcome, rowFound, state, version), listener::onTransition);
    }

    @Override
    public void staleFence(String resource, long token, long highest) {
      deliver(() -> new IdemEvent.StaleFence(source, resource, token, highest), listener::onStaleFence);
    }

    @Override
    public void sequence(String stream, String entity, long seq, Outcome outcome) {
      if (outcome == Outcome.APPLIED) {
        deliver(() -> new IdemEvent.Applied(source, IdempotencyKey.of(stream, entity)), listener::onApplied);
      } else {
        deliver(() -> new IdemEvent.SequenceIgnored(source, IdempotencyKey.of(stream, entity), seq),
            listener::onSequenceIgnored);
      }
    }

    @Override
    public void published(UUID id, String topic, int attempt, Duration publishTime) {
      deliver(() -> new IdemEvent.Published(source, id, topic, attempt, publishTime), listener::onPublished);
    }

    @Override
    public void publishFailed(UUID id, String topic, int attempt, boolean parked, String error) {
      deliver(() -> new IdemEvent.PublishFailed(source, id, topic, attempt, parked, error), listener::onPublishFailed);
    }

    @Override
    public void operatorAction(String action, String target, long rows) {
      deliver(() -> new IdemEvent.OperatorAction(source, action, target, rows), listener::onOperatorAction);
    }
  }
}
