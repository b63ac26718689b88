package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.key.IdempotencyKey;
import dev.idem.window.DedupeWindow;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class EventsTest {

  static final IdempotencyKey KEY = IdempotencyKey.of("shop-7", "chk_7f3a9c");

  /** Records every event it gets. */
  static final class Recording implements IdemListener {
    final List<IdemEvent> events = new ArrayList<>();

    @Override
    public void onApplied(IdemEvent.Applied event) {
      events.add(event);
    }

    @Override
    public void onReplayed(IdemEvent.Replayed event) {
      events.add(event);
    }

    @Override
    public void onInFlight(IdemEvent.InFlight event) {
      events.add(event);
    }

    @Override
    public void onFingerprintMismatch(IdemEvent.FingerprintMismatch event) {
      events.add(event);
    }

    @Override
    public void onLeaseTakenOver(IdemEvent.LeaseTakenOver event) {
      events.add(event);
    }

    @Override
    public void onExpired(IdemEvent.Expired event) {
      events.add(event);
    }
  }

  @Test
  void withoutAListenerNothingIsBuilt() {
    assertThat(Events.to(null, "executor")).isSameAs(Events.NONE);
    assertThat(Events.to(IdemListener.NONE, "executor")).isSameAs(Events.NONE);
    // Arguments that would fail the moment an event was built (a null age, a window asked for a
    // fraction of it) pass straight through: NONE does not look at them.
    assertThatCode(() -> {
      Events.NONE.applied(null);
      Events.NONE.replayed(null, null, null);
      Events.NONE.inFlight(null, null);
      Events.NONE.fingerprintMismatch(null);
      Events.NONE.leaseTakenOver(null, 2, 1);
      Events.NONE.expired(-1);
    }).doesNotThrowAnyException();
  }

  @Test
  void eachEventReachesTheListenerWithItsSource() {
    Recording listener = new Recording();
    Events events = Events.to(listener, "inbox:billing");
    events.applied(KEY);
    events.replayed(KEY, Duration.ofHours(60), DedupeWindow.WEBHOOK_RETRIES);
    events.inFlight(KEY, Duration.ofSeconds(2));
    events.fingerprintMismatch(KEY);
    events.leaseTakenOver(KEY, 3, 4);
    events.expired(120);
    assertThat(listener.events).containsExactly(
        new IdemEvent.Applied("inbox:billing", KEY),
        new IdemEvent.Replayed("inbox:billing", KEY, Duration.ofHours(60), 60.0 / 72),
        new IdemEvent.InFlight("inbox:billing", KEY, Duration.ofSeconds(2)),
        new IdemEvent.FingerprintMismatch("inbox:billing", KEY),
        new IdemEvent.LeaseTakenOver("inbox:billing", KEY, 3, 4),
        new IdemEvent.Expired("inbox:billing", 120));
    assertThat(listener.events).allSatisfy(e -> assertThat(e.source()).isEqualTo("inbox:billing"));
  }

  @Test
  void aReplayNearTheEndOfItsWindowCarriesTheSignal() {
    Recording listener = new Recording();
    Events events = Events.to(listener, "executor");
    events.replayed(KEY, Duration.ofSeconds(30), DedupeWindow.WEBHOOK_RETRIES);
    events.replayed(KEY, Duration.ofHours(66), DedupeWindow.WEBHOOK_RETRIES);
    events.replayed(KEY, Duration.ofSeconds(-2), DedupeWindow.WEBHOOK_RETRIES); // a store clock stepped back
    events.replayed(KEY, Duration.ofHours(1), null); // a tool with no window (transitions)
    List<Double> used = listener.events.stream().map(e -> ((IdemEvent.Replayed) e).windowUsed()).toList();
    assertThat(used.get(0)).isLessThan(DedupeWindow.NEAR_END);
    assertThat(used.get(1)).isGreaterThanOrEqualTo(DedupeWindow.NEAR_END);
    assertThat(used.get(2)).isZero();
    assertThat(((IdemEvent.Replayed) listener.events.get(2)).age()).isEqualTo(Duration.ZERO);
    assertThat(used.get(3)).isZero();
  }

  @Test
  void aThrowingListenerNeverBreaksTheCall() {
    List<String> reached = new ArrayList<>();
    IdemListener broken = new IdemListener() {
      @Override
      public void onApplied(IdemEvent.Applied event) {
        reached.add("applied");
        throw new IllegalStateException("metrics backend down");
      }

      @Override
      public void onReplayed(IdemEvent.Replayed event) {
        reached.add("replayed");
        throw new AssertionError("a listener bug"); // an Error, not only RuntimeExceptions
      }

      @Override
      public void onExpired(IdemEvent.Expired event) {
        reached.add("expired");
        throw new StackOverflowError(); // a VirtualMachineError is the one thing passed on
      }
    };
    Events events = Events.to(broken, "executor");
    assertThatCode(() -> {
      events.applied(KEY);
      events.replayed(KEY, Duration.ofSeconds(1), DedupeWindow.CLIENT_RETRY);
      events.replayed(KEY, null, DedupeWindow.CLIENT_RETRY); // a null age is taken as zero
      events.inFlight(KEY, Duration.ofSeconds(1)); // not overridden: the default does nothing
    }).doesNotThrowAnyException();
    assertThat(reached).containsExactly("applied", "replayed", "replayed");
    assertThatThrownBy(() -> events.expired(1)).isInstanceOf(StackOverflowError.class);
  }
}
