package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.fence.StaleFenceException;
import dev.idem.jdbc.VendorSql;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.time.Duration;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The completer finishes unknown outcomes with a resolver, fenced: every assertion reads the key's
 * row (state, fence, result, lease) and the provider's table back from the database.
 */
@IdemTest(poolSize = 8, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class OutcomeCompleterTest {
  static ExecutorFixture f;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
  }

  /** A scope of this test's own: no other test's stuck keys are listed. */
  static String scope() {
    return "completer-" + UUID.randomUUID().toString().substring(0, 8);
  }

  /** A key stuck as a holder that died after phase 1 leaves it: in flight, fence 1, lease over 1 s ago. */
  static IdempotencyKey stuckKey(String scope) {
    IdempotencyKey key = IdempotencyKey.of(scope, UUID.randomUUID().toString());
    f.insertInFlight(key, VendorSql.emptyFingerprint(f.db), Duration.ofSeconds(-1), callKey(key), Duration.ofSeconds(-2),
        Duration.ofHours(1));
    return key;
  }

  static String callKey(IdempotencyKey key) {
    return Keys.child(key, "external").value();
  }

  static Resolver<String, java.sql.SQLException> provider(AtomicInteger lookUps) {
    return attempt -> {
      lookUps.incrementAndGet();
      return Provider.lookUp(f.ds, attempt.callKey().value());
    };
  }

  /** {@code work} on another thread; what it threw is the future's cause. */
  static <T> CompletableFuture<T> async(java.util.concurrent.Callable<T> work) {
    return CompletableFuture.supplyAsync(() -> {
      try {
        return work.call();
      } catch (Exception e) {
        throw new java.util.concurrent.CompletionException(e);
      }
    });
  }

  static long charges(IdempotencyKey key) {
    return f.count("SELECT count(*) FROM provider_charges WHERE call_key = ?", callKey(key));
  }

  static long providerCalls(IdempotencyKey key) {
    return f.count("SELECT coalesce(sum(calls), 0) FROM provider_charges WHERE call_key = ?", callKey(key));
  }

  @Test
  void aStuckKeyWhoseChargeTheProviderHasIsFinishedAndEveryRepeatReplaysIt() throws Exception {
    String scope = scope();
    IdempotencyKey key = stuckKey(scope);
    String charge = Provider.charge(f.ds, callKey(key), 40); // the dead holder's call reached the provider
    IdempotentExecutor payments = f.idem.executor().build();
    AtomicInteger lookUps = new AtomicInteger();
    int actionsBefore = f.events.of(IdemEvent.OperatorAction.class).size();

    CompleterRun run = payments.completer(Codec.utf8(), provider(lookUps), scope).runOnce();

    assertThat(run.ran()).isTrue();
    assertThat(run.finished()).isEqualTo(1);
    assertThat(run.released() + run.stillUnknown() + run.skipped()).isZero();
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "fence")).as("taken over before it was recorded").isEqualTo("2");
    assertThat(f.column(key, f.resultText())).isEqualTo(charge);
    assertThat(f.column(key, "lease_expires_at")).isNull();
    assertThat(f.events.of(IdemEvent.OperatorAction.class).size() - actionsBefore).isEqualTo(1);

    Execution<String> repeat = payments.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(),
        attempt -> Provider.charge(f.ds, attempt.callKey().value(), 40));
    assertThat(repeat.replayed()).isTrue();
    assertThat(repeat.value()).isEqualTo(charge);
    assertThat(providerCalls(key)).as("nobody called the provider again").isEqualTo(1);
    assertThat(lookUps).hasValue(1);
  }

  @Test
  void aStuckKeyTheProviderNeverSawIsReleasedAndItsNextRepeatCallsOnce() throws Exception {
    String scope = scope();
    IdempotencyKey key = stuckKey(scope);
    IdempotentExecutor payments = f.idem.executor().build();

    CompleterRun run = payments.completer(Codec.utf8(), provider(new AtomicInteger()), scope).runOnce();

    assertThat(run.released()).isEqualTo(1);
    assertThat(run.finished() + run.stillUnknown() + run.skipped()).isZero();
    assertThat(f.column(key, "state")).isEqualTo("I");
    assertThat(f.column(key, "fence")).isEqualTo("2");
    assertThat(f.count("SELECT count(*) FROM idem_keys k WHERE k.scope = ? AND k.key = ? AND k.expires_at <= " + f.clock()
        + " AND k.lease_expires_at <= " + f.clock(), key.scope(), key.value())).as("window and lease over").isEqualTo(1);
    assertThat(charges(key)).isZero();

    CompleterRun again = payments.completer(Codec.utf8(), provider(new AtomicInteger()), scope).runOnce();
    assertThat(again.released() + again.finished() + again.skipped() + again.stillUnknown())
        .as("a released key is its next repeat's, not listed again").isZero();

    Execution<String> repeat = payments.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(),
        attempt -> Provider.charge(f.ds, attempt.callKey().value(), 40));
    assertThat(repeat.applied()).isTrue();
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "fence")).isEqualTo("3");
    assertThat(providerCalls(key)).isEqualTo(1);
  }

  @Test
  void aCompleterRacingALiveHolderChangesNothing() throws Exception {
    String scope = scope();
    IdempotencyKey key = IdempotencyKey.of(scope, UUID.randomUUID().toString());
    IdempotentExecutor payments = f.idem.executor().lease(Duration.ofSeconds(30)).build();
    CountDownLatch calling = new CountDownLatch(1);
    CountDownLatch answer = new CountDownLatch(1);
    CompletableFuture<Execution<String>> holder = async(() -> payments.executeExternal(key,
        Fingerprint.EMPTY, Codec.utf8(), attempt -> {
          calling.countDown();
          assertThat(answer.await(20, TimeUnit.SECONDS)).isTrue();
          return Provider.charge(f.ds, attempt.callKey().value(), 40);
        }));
    assertThat(calling.await(20, TimeUnit.SECONDS)).isTrue();
    String before = f.keyRow(key);
    AtomicInteger lookUps = new AtomicInteger();

    CompleterRun run = payments.completer(Codec.utf8(), provider(lookUps), scope).runOnce();

    assertThat(run.ran()).isTrue();
    assertThat(run.finished() + run.released() + run.stillUnknown() + run.skipped()).isZero();
    assertThat(lookUps).hasValue(0);
    assertThat(f.keyRow(key)).as("the live holder's row, untouched").isEqualTo(before);
    answer.countDown();
    assertThat(holder.get(20, TimeUnit.SECONDS).applied()).isTrue();
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "fence")).isEqualTo("1");
    assertThat(providerCalls(key)).isEqualTo(1);
  }

  @Test
  void aHolderThatWakesAfterTheCompleterTookItsKeyOverIsStaleAndChangesNothing() throws Exception {
    String scope = scope();
    IdempotencyKey key = IdempotencyKey.of(scope, UUID.randomUUID().toString());
    IdempotentExecutor payments = f.idem.executor().lease(Duration.ofMillis(300)).build();
    CountDownLatch charged = new CountDownLatch(1);
    CountDownLatch wake = new CountDownLatch(1);
    CompletableFuture<Execution<String>> zombie = async(() -> payments.executeExternal(key,
        Fingerprint.EMPTY, Codec.utf8(), attempt -> {
          String charge = Provider.charge(f.ds, attempt.callKey().value(), 40);
          charged.countDown();
          assertThat(wake.await(20, TimeUnit.SECONDS)).isTrue(); // a pause past its lease
          return charge;
        }));
    assertThat(charged.await(20, TimeUnit.SECONDS)).isTrue();
    f.awaitLeaseOver(key);

    CompleterRun run = payments.completer(Codec.utf8(), provider(new AtomicInteger()), scope).runOnce();
    assertThat(run.finished()).isEqualTo(1);
    String finished = f.keyRow(key);

    wake.countDown();
    assertThatThrownBy(() -> zombie.get(20, TimeUnit.SECONDS)).hasCauseInstanceOf(StaleFenceException.class);
    assertThat(f.keyRow(key)).as("the completer's record stands").isEqualTo(finished);
    assertThat(f.column(key, "fence")).isEqualTo("2");
    assertThat(providerCalls(key)).isEqualTo(1);
  }

  @Test
  void twoCompletersAtOnceOneRunsAndTheOtherDoesNothing() throws Exception {
    String scope = scope();
    IdempotencyKey key = stuckKey(scope);
    String charge = Provider.charge(f.ds, callKey(key), 40);
    IdempotentExecutor payments = f.idem.executor().name("race-" + scope).build();
    CountDownLatch inLookUp = new CountDownLatch(1);
    CountDownLatch answer = new CountDownLatch(1);
    AtomicInteger lookUps = new AtomicInteger();
    Resolver<String, Exception> slow = attempt -> {
      lookUps.incrementAndGet();
      inLookUp.countDown();
      assertThat(answer.await(20, TimeUnit.SECONDS)).isTrue();
      return Provider.lookUp(f.ds, attempt.callKey().value());
    };
    OutcomeCompleter first = payments.completer(Codec.utf8(), slow, scope);
    OutcomeCompleter second = payments.completer(Codec.utf8(), slow, scope);

    CompletableFuture<CompleterRun> running = CompletableFuture.supplyAsync(first::runOnce);
    assertThat(inLookUp.await(20, TimeUnit.SECONDS)).isTrue();
    CompleterRun other = second.runOnce();
    answer.countDown();
    CompleterRun ran = running.get(20, TimeUnit.SECONDS);

    assertThat(other.ran()).as("the lease was held").isFalse();
    assertThat(other.finished() + other.released() + other.stillUnknown() + other.skipped()).isZero();
    assertThat(ran.ran()).isTrue();
    assertThat(ran.finished()).isEqualTo(1);
    assertThat(lookUps).hasValue(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "fence")).isEqualTo("2");
    assertThat(f.column(key, f.resultText())).isEqualTo(charge);
    assertThat(f.count("SELECT count(*) FROM idem_leases WHERE resource = ?", "idem.completer:race-" + scope))
        .as("one lease row, released").isEqualTo(1);

    CompleterRun later = second.runOnce();
    assertThat(later.ran()).as("the first run gave the lease up").isTrue();
  }

  @Test
  void aResolverThatThrowsLeavesTheKeyUnknownWithItsLeaseEnded() throws Exception {
    String scope = scope();
    IdempotencyKey key = stuckKey(scope);
    IdempotentExecutor payments = f.idem.executor().build();
    Resolver<String, Exception> down = attempt -> {
      throw new java.io.IOException("provider down (test)");
    };

    CompleterRun run = payments.completer(Codec.utf8(), down, scope).runOnce();

    assertThat(run.stillUnknown()).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("I");
    assertThat(f.column(key, "fence")).isEqualTo("2");
    assertThat(f.leaseEnded(key)).as("ended at once, for the next run or a repeat").isTrue();
    assertThat(payments.completer(Codec.utf8(), provider(new AtomicInteger()), scope).runOnce().released())
        .as("the next run asks again").isEqualTo(1);
  }

  @Test
  void maxKeysBoundsARunAndKeysOfOtherScopesAreNeverRead() throws Exception {
    String scope = scope();
    String other = scope();
    for (int i = 0; i < 3; i++) {
      stuckKey(scope);
    }
    IdempotencyKey elsewhere = stuckKey(other);
    String before = f.keyRow(elsewhere);
    IdempotentExecutor payments = f.idem.executor().build();
    OutcomeCompleter completer = payments.completer(Codec.utf8(), provider(new AtomicInteger()), scope).bounds(2, Duration.ofMinutes(1));

    assertThat(completer.runOnce().released()).isEqualTo(2);
    assertThat(completer.runOnce().released()).isEqualTo(1);
    assertThat(f.keyRow(elsewhere)).isEqualTo(before);
  }

  @Test
  void badSettingsAreRefusedNamingThem() {
    IdempotentExecutor payments = f.idem.executor().build();
    Resolver<String, RuntimeException> none = attempt -> Optional.empty();
    assertThatThrownBy(() -> payments.completer(Codec.utf8(), none)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("scopes");
    assertThatThrownBy(() -> payments.completer(Codec.utf8(), none, "a").bounds(0, Duration.ofMinutes(1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxKeys");
    assertThatThrownBy(() -> payments.completer(Codec.utf8(), none, "a").bounds(1, Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("runFor");
    assertThatThrownBy(() -> payments.completer(Codec.utf8(), none, "bad scope"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("scope");
    assertThatThrownBy(() -> payments.completer(null, none, "a")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("codec");
  }
}
