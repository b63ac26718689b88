package dev.idem.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.key.IdempotencyKey;
import dev.idem.transition.Outcome;
import dev.idem.window.DedupeWindow;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.UUID;
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

    @Override
    public void onTransition(IdemEvent.Transition event) {
      events.add(event);
    }

    @Override
    public void onStaleFence(IdemEvent.StaleFence event) {
      events.add(event);
    }

    @Override
    public void onSequenceIgnored(IdemEvent.SequenceIgnored event) {
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
      Events.NONE.transition(null, null, null, null, null, false, null, null);
      Events.NONE.staleFence(null, 2, 1);
      Events.NONE.sequence(null, null, 0, null);
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
  void aTransitionCarriesTheStepTheOutcomeAndTheRowWithItsIdAsText() {
    Recording listener = new Recording();
    Events events = Events.to(listener, "transitions:shop.orders");
    UUID uuid = UUID.fromString("0190f3a1-7c2e-7d4b-9a51-3c8e2f6b1d07");
    events.transition("shop.orders", uuid, "PLACED", "PACKED", Outcome.APPLIED, true, Optional.of("PACKED"),
        OptionalLong.of(2));
    events.transition("shop.orders", 42L, "PLACED", "PACKED", Outcome.CONFLICT, true, Optional.of("CANCELLED"),
        OptionalLong.of(1));
    events.transition("shop.orders", "o12", null, null, Outcome.CONFLICT, true, Optional.of("PLACED"),
        OptionalLong.of(7)); // an edit at a version that moved on
    events.transition("shop.orders", "missing", "PACKED", "SHIPPED", Outcome.CONFLICT, false, Optional.empty(),
        OptionalLong.empty());
    assertThat(listener.events).containsExactly(
        new IdemEvent.Transition("transitions:shop.orders", "shop.orders", uuid.toString(), Optional.of("PLACED"),
            Optional.of("PACKED"), Outcome.APPLIED, true, Optional.of("PACKED"), OptionalLong.of(2)),
        new IdemEvent.Transition("transitions:shop.orders", "shop.orders", "42", Optional.of("PLACED"),
            Optional.of("PACKED"), Outcome.CONFLICT, true, Optional.of("CANCELLED"), OptionalLong.of(1)),
        new IdemEvent.Transition("transitions:shop.orders", "shop.orders", "o12", Optional.empty(), Optional.empty(),
            Outcome.CONFLICT, true, Optional.of("PLACED"), OptionalLong.of(7)),
        new IdemEvent.Transition("transitions:shop.orders", "shop.orders", "missing", Optional.of("PACKED"),
            Optional.of("SHIPPED"), Outcome.CONFLICT, false, Optional.empty(), OptionalLong.empty()));
  }

  @Test
  void aRowIdThatIsNoValidKeyStillMakesAnEventAndOneThatCannotBeReadBreaksNothing() {
    Recording listener = new Recording();
    Events events = Events.to(listener, "transitions:orders");
    // A row id is the user's data: spaces, accents, control characters, any length. None of it fits
    // an IdempotencyKey, and none of it may keep the event from being built.
    String wild = "caf\u00e9 order\t#7 " + "x".repeat(1000);
    events.transition("orders", wild, "PLACED", "PACKED", Outcome.ALREADY_DONE, true, Optional.of("SHIPPED"),
        OptionalLong.empty());
    assertThat(listener.events).singleElement()
        .isInstanceOfSatisfying(IdemEvent.Transition.class, t -> assertThat(t.id()).isEqualTo(wild));
    Object unreadable = new Object() {
      @Override
      public String toString() {
        throw new IllegalStateException("a lazy proxy outside its session");
      }
    };
    assertThatCode(() -> events.transition("orders", unreadable, "PLACED", "PACKED", Outcome.APPLIED, true,
        Optional.of("PACKED"), OptionalLong.empty())).doesNotThrowAnyException();
    assertThat(listener.events).hasSize(1); // nothing half-built reached the listener
  }

  @Test
  void aSequenceNumberIsAppliedOrIgnoredUnderTheKeyOfItsStreamAndEntity() {
    Recording listener = new Recording();
    Events events = Events.to(listener, "sequences:price-updates");
    events.sequence("price-updates", "sku-42", 3, Outcome.APPLIED);
    events.sequence("price-updates", "sku-42", 3, Outcome.ALREADY_DONE);
    events.sequence("price-updates", "sku-42", 1, Outcome.ALREADY_DONE);
    IdempotencyKey sku = IdempotencyKey.of("price-updates", "sku-42");
    assertThat(listener.events).containsExactly(
        new IdemEvent.Applied("sequences:price-updates", sku),
        new IdemEvent.SequenceIgnored("sequences:price-updates", sku, 3),
        new IdemEvent.SequenceIgnored("sequences:price-updates", sku, 1));
    // An entity that is no valid key part cannot reach here from EntitySequences (it checks first);
    // if one did, the failed build is logged, not thrown.
    assertThatCode(() -> events.sequence("price-updates", "two words", 1, Outcome.APPLIED))
        .doesNotThrowAnyException();
    assertThat(listener.events).hasSize(3);
  }

  @Test
  void aStaleFenceNamesTheResourceAndBothTokens() {
    Recording listener = new Recording();
    Events.to(listener, "transitions:runs").staleFence("runs/run-42", 4, 5);
    assertThat(listener.events).containsExactly(new IdemEvent.StaleFence("transitions:runs", "runs/run-42", 4, 5));
  }

  @Test
  void aReplayNearTheEndOfItsWindowCarriesTheSignal() {
    Recording listener = new Recording();
    Events events = Events.to(listener, "executor");
    events.replayed(KEY, Duration.ofSeconds(30), DedupeWindow.WEBHOOK_RETRIES);
    events.replayed(KEY, Duration.ofHours(66), DedupeWindow.WEBHOOK_RETRIES);
    events.replayed(KEY, Duration.ofSeconds(-2), DedupeWindow.WEBHOOK_RETRIES); // a store clock stepped back
    events.replayed(KEY, Duration.ofHours(1), null); // a caller with no window at hand
    List<Double> used = listener.events.stream().map(e -> ((IdemEvent.Replayed) e).windowUsed()).toList();
    assertThat(used.get(0)).isLessThan(DedupeWindow.NEAR_END);
    assertThat(used.get(1)).isGreaterThanOrEqualTo(DedupeWindow.NEAR_END);
    assertThat(used.get(2)).isZero();
    assertThat(((IdemEvent.Replayed) listener.events.get(2)).age()).isEqualTo(Duration.ZERO);
    assertThat(used.get(3)).isZero();
  }

  private static int recurse(int n) {
    return recurse(n + 1) + 1;
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
      public void onInFlight(IdemEvent.InFlight event) {
        reached.add("inFlight");
        recurse(0); // a listener that recursed forever: its bug, the call's outcome stands
      }

      @Override
      public void onExpired(IdemEvent.Expired event) {
        reached.add("expired");
        throw new OutOfMemoryError(); // the JVM in trouble: the one kind of failure passed on
      }
    };
    Events events = Events.to(broken, "executor");
    assertThatCode(() -> {
      events.applied(KEY);
      events.replayed(KEY, Duration.ofSeconds(1), DedupeWindow.CLIENT_RETRY);
      events.replayed(KEY, null, DedupeWindow.CLIENT_RETRY); // a null age is taken as zero
      events.inFlight(KEY, Duration.ofSeconds(1));
      events.fingerprintMismatch(KEY); // not overridden: the default does nothing
    }).doesNotThrowAnyException();
    assertThat(reached).containsExactly("applied", "replayed", "replayed", "inFlight");
    assertThatThrownBy(() -> events.expired(1)).isInstanceOf(OutOfMemoryError.class);
  }

  @Test
  void aListenerThatFailsAndCannotEvenBeNamedStillBreaksNothing() {
    List<IdemEvent> reached = new ArrayList<>();
    IdemListener broken = new IdemListener() {
      @Override
      public void onTransition(IdemEvent.Transition event) {
        reached.add(event);
        throw new IllegalStateException("metrics backend down");
      }

      @Override
      public String toString() {
        throw new IllegalStateException("and its toString is broken too");
      }
    };
    Events events = Events.to(broken, "transitions:orders");
    assertThatCode(() -> events.transition("orders", "o1", "PLACED", "PACKED", Outcome.CONFLICT, true,
        Optional.of("CANCELLED"), OptionalLong.of(1))).doesNotThrowAnyException();
    assertThat(reached).hasSize(1);
  }

  @SuppressWarnings("unchecked")
  private static <E extends Throwable> void sneakyThrow(Throwable t) throws E {
    throw (E) t;
  }

  /**
   * A listener that throws {@code thrown} from {@code onApplied}, which declares nothing: Kotlin
   * code, or Java with Lombok's @SneakyThrows, can throw a checked exception so.
   */
  private static IdemListener throwingOnApplied(Throwable thrown, List<IdemEvent> seen) {
    return new IdemListener() {
      @Override
      public void onApplied(IdemEvent.Applied event) {
        seen.add(event);
        sneakyThrow(thrown);
      }
    };
  }

  /** A checked exception from a listener breaks the call no more than a runtime one. */
  @Test
  void aListenerThrowingACheckedExceptionNeverBreaksTheCall() {
    List<IdemEvent> seen = new ArrayList<>();
    Events events = Events.to(throwingOnApplied(new java.io.IOException("metrics socket closed"), seen), "executor");
    assertThatCode(() -> events.applied(IdempotencyKey.of("shop-7", "k1"))).doesNotThrowAnyException();
    assertThat(seen).hasSize(1);
  }

  /**
   * A listener's InterruptedException (a blocking put) is swallowed like any failure, but throwing
   * it cleared the thread's interrupt flag: the flag is set again, so the thread still knows it was
   * asked to stop.
   */
  @Test
  void aListenersInterruptedExceptionLeavesTheThreadInterrupted() {
    List<IdemEvent> seen = new ArrayList<>();
    Events events = Events.to(throwingOnApplied(new InterruptedException("queue.put interrupted"), seen), "executor");
    assertThatCode(() -> events.applied(IdempotencyKey.of("shop-7", "k1"))).doesNotThrowAnyException();
    assertThat(seen).hasSize(1);
    assertThat(Thread.interrupted()).as("the interrupt survives the listener").isTrue();
  }
}
