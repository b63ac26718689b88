package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.event.IdemEvent;
import dev.idem.fence.FencingToken;
import dev.idem.fence.StaleFenceException;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.PoolOfOne;
import dev.idem.jdbc.VendorSql;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.CodecException;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** External effects in phases: leases by the database clock, fencing tokens, takeovers, resolvers. */
@IdemTest(poolSize = 6, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class ExternalEffectTest {
  static final Duration LEASE = Duration.ofSeconds(1);
  static ExecutorFixture f;
  /** Answers at once when the lease is live. */
  static IdempotentExecutor impatient;
  /** Polls a live lease for longer than it lasts, so it takes over. */
  static IdempotentExecutor patient;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
    impatient = f.idem.executor().lease(LEASE).inFlightWait(Duration.ZERO).build();
    patient = f.idem.executor().lease(LEASE).inFlightWait(Duration.ofSeconds(5)).build();
  }

  static IdempotencyKey newKey() {
    return IdempotencyKey.of("checkout", UUID.randomUUID().toString());
  }

  long charges(IdempotencyKey key) {
    return f.count("SELECT count(*) FROM provider_charges WHERE call_key = '" + Keys.child(key, "external").value() + "'");
  }

  long calls(IdempotencyKey key) {
    return f.count("SELECT coalesce(sum(calls), 0) FROM provider_charges WHERE call_key = '" + Keys.child(key, "external").value() + "'");
  }

  /**
   * Phase 1 inside a transaction of the same pool takes a second connection: on a pool that has
   * none to give, the call fails after the pool's timeout saying so, and nothing was called or
   * claimed.
   */
  @Test
  void insideATransactionOnAnExhaustedPoolTheCallFailsSayingWhyAndNothingIsClaimedOrCalled() {
    IdempotencyKey key = newKey();
    AtomicInteger called = new AtomicInteger();
    try (HikariDataSource one = PoolOfOne.of(f.db)) {
      Idem idem = Idem.builder(one).build();
      IdempotentExecutor executor = idem.executor().build();
      assertThatThrownBy(() -> idem.inTransaction(tx -> executor.executeExternal(key, Fingerprint.of("100 EUR"), Codec.utf8(), a -> {
        called.incrementAndGet();
        return Provider.charge(f.ds, a.callKey().value(), 100);
      }))).isInstanceOf(DataAccessException.class)
          .hasMessageContaining("Connection is not available")
          .hasMessageContaining("needs a second connection while the transaction holds the first");
    }
    assertThat(called).hasValue(0);
    assertThat(charges(key)).isZero();
    assertThat(f.keyRows(key)).as("key rows").isZero();
  }

  @Test
  void theCallRunsOnceWithTheDerivedCallKeyAndARepeatGetsTheStoredResult() throws Exception {
    IdempotencyKey key = newKey();
    List<ExternalAttempt> attempts = new CopyOnWriteArrayList<>();
    ExternalCall<String, Exception> call = a -> {
      attempts.add(a);
      assertThat(f.column(key, "state")).as("phase 1 committed before the call").isEqualTo("I");
      return Provider.charge(f.ds, a.callKey().value(), 100);
    };
    Execution<String> first = impatient.executeExternal(key, Fingerprint.of("100 EUR"), Codec.utf8(), call);
    Execution<String> second = impatient.executeExternal(key, Fingerprint.of("100 EUR"), Codec.utf8(), call);

    assertThat(first.applied()).isTrue();
    assertThat(second.replayed()).isTrue();
    assertThat(second.value()).isEqualTo(first.value()).startsWith("ch_");
    assertThat(attempts).singleElement().satisfies(a -> {
      assertThat(a.key()).isEqualTo(key);
      assertThat(a.callKey()).isEqualTo(Keys.child(key, "external"));
      assertThat(a.token()).isEqualTo(FencingToken.FIRST);
      assertThat(a.takeover()).isFalse();
    });
    assertThat(charges(key)).isEqualTo(1);
    assertThat(calls(key)).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "fence")).isEqualTo("1");
    assertThat(f.column(key, "call_key")).isEqualTo(Keys.child(key, "external").value());
    assertThat(f.column(key, "lease_expires_at")).isNull();
  }

  @Test
  void aCopyThatFindsALiveLeaseIsInFlightWithTheLeasesTimeLeft() throws Exception {
    IdempotencyKey key = newKey();
    CountDownLatch calling = new CountDownLatch(1);
    CountDownLatch answer = new CountDownLatch(1);
    CompletableFuture<Execution<String>> first = CompletableFuture.supplyAsync(() -> {
      try {
        return impatient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
          calling.countDown();
          answer.await(10, TimeUnit.SECONDS);
          return Provider.charge(f.ds, a.callKey().value(), 1);
        });
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    });
    assertThat(calling.await(10, TimeUnit.SECONDS)).isTrue();
    AtomicInteger secondCalls = new AtomicInteger();
    Execution<String> second = impatient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
      secondCalls.incrementAndGet();
      return "no";
    });
    assertThat(second).isInstanceOfSatisfying(Execution.InFlight.class, i ->
        assertThat(i.retryAfter()).isPositive().isLessThanOrEqualTo(LEASE));
    assertThat(secondCalls).hasValue(0);
    answer.countDown();
    assertThat(first.get(10, TimeUnit.SECONDS).applied()).isTrue();
    assertThat(charges(key)).isEqualTo(1);
    assertThat(f.events.of(IdemEvent.InFlight.class, key)).hasSize(1);
  }

  @Test
  void aZombiePastItsLeaseIsRefusedAndTheStoredResultIsItsSuccessors() throws Exception {
    IdempotencyKey key = newKey();
    CountDownLatch zombieCalled = new CountDownLatch(1);
    CountDownLatch wakeZombie = new CountDownLatch(1);
    CompletableFuture<Throwable> zombie = CompletableFuture.supplyAsync(() -> {
      try {
        impatient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
          String charge = Provider.charge(f.ds, a.callKey().value(), 50);
          zombieCalled.countDown();
          wakeZombie.await(20, TimeUnit.SECONDS); // a GC pause, a hung socket: past the lease
          return charge + " by token " + a.token().value();
        });
        return null;
      } catch (Throwable t) {
        return t;
      }
    });
    assertThat(zombieCalled.await(10, TimeUnit.SECONDS)).isTrue();
    List<ExternalAttempt> attempts = new CopyOnWriteArrayList<>();
    Execution<String> successor = patient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
      attempts.add(a);
      return Provider.charge(f.ds, a.callKey().value(), 50) + " by token " + a.token().value();
    });
    assertThat(successor.applied()).isTrue();
    assertThat(successor.value()).endsWith(" by token 2");
    assertThat(attempts).singleElement().satisfies(a -> {
      assertThat(a.takeover()).isTrue();
      assertThat(a.token().value()).isEqualTo(2);
      assertThat(a.callKey()).isEqualTo(Keys.child(key, "external"));
    });
    String stored = f.keyRow(key);

    wakeZombie.countDown();
    Throwable refused = zombie.get(10, TimeUnit.SECONDS);
    assertThat(refused).isInstanceOfSatisfying(StaleFenceException.class, e -> {
      assertThat(e.token()).isEqualTo(1);
      assertThat(e.highest()).isEqualTo(2);
    });
    assertThat(f.events.of(IdemEvent.StaleFence.class))
        .filteredOn(e -> e.resource().equals("key " + key))
        .singleElement().satisfies(e -> {
          assertThat(e.token()).isEqualTo(1);
          assertThat(e.highest()).isEqualTo(2);
        });
    assertThat(f.keyRow(key)).as("the zombie's write left nothing").isEqualTo(stored);
    assertThat(f.column(key, f.resultText())).isEqualTo(successor.value());
    assertThat(charges(key)).isEqualTo(1); // the provider deduped the second call by the call key
    assertThat(calls(key)).isEqualTo(2);
    assertThat(f.events.of(IdemEvent.LeaseTakenOver.class, key)).singleElement().satisfies(e -> {
      assertThat(e.previousToken()).isEqualTo(1);
      assertThat(e.newToken()).isEqualTo(2);
    });
  }

  /**
   * A repeat with a resolver that looks the call key up at the provider; asserts it took the claim
   * over with token 2, asked the resolver once with the derived call key, and never called.
   */
  Execution<String> takenOverWithTheResolverAsked(IdempotencyKey key, int amount) throws Exception {
    AtomicInteger calls = new AtomicInteger();
    List<ExternalAttempt> asked = new CopyOnWriteArrayList<>();
    Execution<String> e = impatient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
      calls.incrementAndGet();
      return Provider.charge(f.ds, a.callKey().value(), amount);
    }, a -> {
      asked.add(a);
      return Provider.lookUp(f.ds, a.callKey().value());
    });
    assertThat(e.applied()).isTrue();
    assertThat(calls).hasValue(0);
    assertThat(asked).singleElement().satisfies(a -> {
      assertThat(a.takeover()).isTrue();
      assertThat(a.callKey()).isEqualTo(Keys.child(key, "external"));
      assertThat(a.token().value()).isEqualTo(2);
    });
    return e;
  }

  @Test
  void aCallThatThrowsEndsItsLeaseAndTheNextRepeatAsksTheResolverInsteadOfCallingAgain() throws Exception {
    IdempotencyKey key = newKey();
    assertThatThrownBy(() -> impatient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
      Provider.charge(f.ds, a.callKey().value(), 70); // the charge went through ...
      throw new IOException("read timed out"); // ... but the answer was lost
    })).isInstanceOf(IOException.class).hasMessage("read timed out");
    assertThat(f.column(key, "state")).isEqualTo("I");
    assertThat(f.leaseEnded(key)).as("lease ended at once").isTrue();

    Execution<String> e = takenOverWithTheResolverAsked(key, 70);
    assertThat(e.value()).isEqualTo(Provider.lookUp(f.ds, Keys.child(key, "external").value()).orElseThrow());
    assertThat(this.calls(key)).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
  }

  @Test
  void anUnfinishedAttemptPastItsWindowIsTakenOverAndTheResolverIsAsked() throws Exception {
    IdempotencyKey key = newKey();
    String callKey = Keys.child(key, "external").value();
    Provider.charge(f.ds, callKey, 40); // the holder's charge went through, then the holder died
    f.insertInFlight(key, VendorSql.emptyFingerprint(f.db), Duration.ofDays(-2), callKey, Duration.ofDays(-3), Duration.ofDays(-2));
    takenOverWithTheResolverAsked(key, 40);
    assertThat(f.events.of(IdemEvent.LeaseTakenOver.class, key)).singleElement().satisfies(t -> {
      assertThat(t.previousToken()).isEqualTo(1);
      assertThat(t.newToken()).isEqualTo(2);
    });
    assertThat(this.calls(key)).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "fence")).isEqualTo("2");
  }

  /**
   * Past its window a key belongs to no intent, but a row whose attempt still holds its lease stays
   * until the lease ends. Another request under the key then waits like any copy (in flight), and
   * is not refused with KeyReuseException, which would tell the client "never retry" for a request
   * that runs as soon as the lease ends.
   */
  @Test
  void anotherRequestPastTheWindowWhileAnAttemptHoldsItsLeaseIsInFlightThenRuns() throws Exception {
    IdempotencyKey key = newKey();
    Fingerprint first = Fingerprint.of("request a");
    Fingerprint other = Fingerprint.of("request b");
    String callKey = Keys.child(key, "external").value();
    f.insertInFlight(key, VendorSql.hexBytes(f.db, first.hex()), Duration.ofHours(1), callKey, Duration.ofDays(-2),
        Duration.ofDays(-1));
    String before = f.keyRow(key);
    AtomicInteger called = new AtomicInteger();

    Execution<String> external = impatient.executeExternal(key, other, Codec.utf8(), a -> {
      called.incrementAndGet();
      return "b";
    });
    assertThat(external.inFlight()).isTrue();
    Execution<String> local = f.idem.executor().inFlightWait(Duration.ZERO).build()
        .execute(key, other, Codec.utf8(), tx -> "local");
    assertThat(local.inFlight()).isTrue();
    assertThat(called).hasValue(0);
    assertThat(f.keyRow(key)).isEqualTo(before);
    assertThat(f.events.of(IdemEvent.FingerprintMismatch.class, key)).isEmpty();

    // The attempt's lease ends: the key starts a new life for the other request, with a new token.
    f.endLease(key, Duration.ofSeconds(1));
    Execution<String> runs = impatient.executeExternal(key, other, Codec.utf8(), a -> {
      called.incrementAndGet();
      return Provider.charge(f.ds, a.callKey().value(), 7);
    });
    assertThat(runs.applied()).isTrue();
    assertThat(called).hasValue(1);
    assertThat(charges(key)).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "fence")).isEqualTo("2");
  }

  @Test
  void aResolverThatKnowsNothingLetsTheTakeoverCallAgainWithTheSameCallKey() throws Exception {
    IdempotencyKey key = newKey();
    List<String> callKeys = new CopyOnWriteArrayList<>();
    assertThatThrownBy(() -> impatient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
      callKeys.add(a.callKey().value());
      throw new IOException("connection refused"); // never reached the provider
    })).isInstanceOf(IOException.class);
    Execution<String> e = impatient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
      callKeys.add(a.callKey().value());
      return Provider.charge(f.ds, a.callKey().value(), 5);
    }, a -> Optional.empty());
    assertThat(e.applied()).isTrue();
    assertThat(callKeys).hasSize(2).containsOnly(Keys.child(key, "external").value());
    assertThat(charges(key)).isEqualTo(1);
    assertThat(f.column(key, "fence")).isEqualTo("2");
  }

  @Test
  void aDeclineIsAResultStoredAndReplayed() throws Exception {
    IdempotencyKey key = newKey();
    Execution<String> first = impatient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> "declined");
    Execution<String> second = impatient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> "approved");
    assertThat(first.value()).isEqualTo("declined");
    assertThat(second.replayed()).isTrue();
    assertThat(second.value()).isEqualTo("declined");
  }

  @Test
  void aMismatchIsRefusedAndTheRowIsUnchanged() throws Exception {
    IdempotencyKey key = newKey();
    impatient.executeExternal(key, Fingerprint.of("a"), Codec.utf8(), a -> Provider.charge(f.ds, a.callKey().value(), 1));
    String before = f.keyRow(key);
    assertThatThrownBy(() -> impatient.executeExternal(key, Fingerprint.of("b"), Codec.utf8(), a -> "x"))
        .isInstanceOf(KeyReuseException.class);
    assertThat(f.keyRow(key)).isEqualTo(before);
    assertThat(calls(key)).isEqualTo(1);
  }

  @Test
  void aResultTheCodecCannotEncodeStoresNothingAndEndsTheLease() {
    IdempotencyKey key = newKey();
    Codec<String> broken = ExecutorFixture.unencodable();
    assertThatThrownBy(() -> impatient.executeExternal(key, Fingerprint.EMPTY, broken, a -> "ok"))
        .isInstanceOf(CodecException.class).hasMessageContaining("no encoding for ok").hasMessageContaining("nothing was stored");
    assertThat(f.column(key, "state")).isEqualTo("I");
    assertThat(f.column(key, "result")).isNull();
    assertThat(f.leaseEnded(key)).isTrue();
  }

  @Test
  void aLocalCallOnAKeyWithAnExternalClaimInFlightIsInFlight() throws Exception {
    IdempotencyKey key = newKey();
    assertThatThrownBy(() -> impatient.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
      throw new IOException("x");
    })).isInstanceOf(IOException.class);
    Execution<String> local = impatient.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
    assertThat(local.inFlight()).isTrue();
    assertThat(f.payments(key.value())).isZero();
  }
}
