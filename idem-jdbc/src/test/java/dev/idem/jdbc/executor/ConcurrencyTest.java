package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.Racers;
import dev.idem.jdbc.internal.SqlStates;
import dev.idem.jdbc.tx.RetryBudget;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Race;
import dev.idem.testing.TestDatabase;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** Real threads on real connections racing on keys, at each isolation level; rows counted. */
@IdemTest(poolSize = 8, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class ConcurrencyTest {
  static ExecutorFixture f;
  static ExecutorService background;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
    background = Executors.newCachedThreadPool();
  }

  @AfterAll
  static void stop() {
    background.shutdownNow();
  }

  @Test
  void thirtyTwoThreadsRacingOneKeyCommitOneEffectAndAllGetTheSameResult() throws Exception {
    IdempotencyKey key = IdempotencyKey.of("race", UUID.randomUUID().toString());
    AtomicInteger runs = new AtomicInteger();
    DataSource ds = Racers.pool(f.db, 32, "TRANSACTION_READ_COMMITTED");
    IdempotentExecutor executor = Idem.builder(ds).build().executor().inFlightWait(Duration.ofSeconds(20)).build();
    List<Execution<String>> results = pileUp(32, executor, key, Fingerprint.of("one request"), 100, runs);
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(results).filteredOn(Execution::applied).hasSize(1);
    assertThat(results).filteredOn(Execution::replayed).hasSize(31);
    String first = results.stream().filter(Execution::applied).findFirst().orElseThrow().value();
    assertThat(results).extracting(Execution::value).containsOnly(first);
    assertThat(runs).hasValue(1); // the losers waited on the key and never ran the effect
  }

  /**
   * {@code copies} threads calling {@code executor} with {@code key} at once: the one that claims
   * it pays {@code amount} (counted in {@code runs}) and holds the key until all the others wait on
   * it.
   */
  static List<Execution<String>> pileUp(int copies, IdempotentExecutor executor, IdempotencyKey key, Fingerprint request,
      int amount, AtomicInteger runs) throws Exception {
    return Race.together(copies, i -> executor.execute(key, request, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      String id = ExecutorFixture.pay(tx, key.value(), amount);
      LockWaits.await(f.db, copies - 1);
      return id;
    }));
  }

  /** Every isolation level: PostgreSQL runs READ UNCOMMITTED as READ COMMITTED; MariaDB has all four. */
  @ParameterizedTest
  @CsvSource({
      "TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ", "TRANSACTION_SERIALIZABLE"})
  void aThousandKeysSentThreeTimesFromEightThreadsCommitExactlyAThousandEffects(String isolation)
      throws Exception {
    String batch = UUID.randomUUID().toString().substring(0, 8);
    List<IdempotencyKey> sends = new ArrayList<>();
    for (int i = 0; i < 1000; i++) {
      IdempotencyKey key = IdempotencyKey.of("batch-" + batch, "k" + i);
      sends.add(key);
      sends.add(key);
      sends.add(key);
    }
    // Copies of a key land near each other, so they really race.
    Random random = new Random(42);
    for (int i = 0; i < sends.size(); i++) {
      int j = Math.min(sends.size() - 1, i + random.nextInt(8));
      Collections.swap(sends, i, j);
    }
    ConcurrentLinkedQueue<IdempotencyKey> queue = new ConcurrentLinkedQueue<>(sends);
    Map<IdempotencyKey, List<String>> seen = new ConcurrentHashMap<>();
    AtomicInteger surfaced = new AtomicInteger();
    try (HikariDataSource ds = f.db.dataSource(8, isolation)) {
      // Enough re-runs for a loser of a 3-way race under REPEATABLE READ / SERIALIZABLE.
      IdempotentExecutor executor = Idem.builder(ds).retries(new RetryBudget(6, Duration.ofMillis(5), Duration.ofMillis(50)))
          .build().executor().inFlightWait(Duration.ofSeconds(20)).build();
      Race.together(8, i -> {
        for (IdempotencyKey key; (key = queue.poll()) != null; ) {
          String request = "batch-" + batch + "/" + key.value();
          Execution<String> e;
          try {
            e = executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, request, 1));
          } catch (DataAccessException failure) {
            // Past the bounded re-runs a serialization failure is surfaced, as documented: the
            // client sends the same key again, which is safe.
            assertThat(SqlStates.isRetryable(failure)).as("only serialization failures surface").isTrue();
            surfaced.incrementAndGet();
            queue.add(key);
            continue;
          }
          seen.computeIfAbsent(key, k -> Collections.synchronizedList(new ArrayList<>())).add(e.value());
        }
        return null;
      });
    }
    assertThat(f.count("SELECT count(*) FROM payments WHERE request LIKE 'batch-" + batch + "/%'")).isEqualTo(1000);
    assertThat(f.count("SELECT count(DISTINCT request) FROM payments WHERE request LIKE 'batch-" + batch + "/%'")).isEqualTo(1000);
    assertThat(f.count("SELECT count(*) FROM idem_keys WHERE scope = 'batch-" + batch + "'")).isEqualTo(1000);
    assertThat(seen).hasSize(1000);
    System.out.println(isolation + ": serialization failures surfaced after re-runs: " + surfaced);
    assertThat(seen.values()).allSatisfy(results -> assertThat(results).hasSize(3).containsOnly(results.get(0)));
  }

  /**
   * Racers on one key under snapshot isolation all get the winner's result, even with no re-runs
   * allowed for failures after the effect: a loser's claim that waited for the winner's row fails
   * with 40001 before its effect ran, and such a call runs again without counting against {@code
   * RetryBudget#maxRuns()}: only runs of the callback count.
   */
  @ParameterizedTest
  @CsvSource({
      "TRANSACTION_REPEATABLE_READ, 4", "TRANSACTION_SERIALIZABLE, 4",
      "TRANSACTION_REPEATABLE_READ, 1", "TRANSACTION_SERIALIZABLE, 1"})
  void underSnapshotIsolationRacersOnOneKeyAreRetriedIntoReplays(String isolation, int runs)
      throws Exception {
    IdempotencyKey key = IdempotencyKey.of("snapshot", UUID.randomUUID().toString());
    DataSource ds = Racers.pool(f.db, 32, isolation); // 8 of its connections race
    IdempotentExecutor executor = Idem.builder(ds).retries(new RetryBudget(runs, Duration.ofMillis(5), Duration.ofMillis(50)))
        .build().executor().inFlightWait(Duration.ofSeconds(20)).build();
    List<Execution<String>> results = pileUp(8, executor, key, Fingerprint.EMPTY, 1, new AtomicInteger());
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(results).filteredOn(Execution::applied).hasSize(1);
    assertThat(results).extracting(Execution::value).containsOnly(results.get(0).value());
  }

  @Test
  void aRepeatBlockedOnTheKeyGetsTheReplayAsSoonAsTheFirstCommits() throws Exception {
    IdempotencyKey key = IdempotencyKey.of("wait", UUID.randomUUID().toString());
    IdempotentExecutor executor = f.idem.executor().inFlightWait(Duration.ofSeconds(20)).build();
    CountDownLatch claimed = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    Future<Execution<String>> first = background.submit(() ->
        executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
          claimed.countDown();
          finish.await();
          return ExecutorFixture.pay(tx, key.value(), 1);
        }));
    claimed.await();
    Future<Execution<String>> second = background.submit(() ->
        executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1)));
    LockWaits.await(f.db, 1);
    assertThat(second.isDone()).as("the repeat blocks on the key while the first runs").isFalse();
    finish.countDown();
    assertThat(first.get(10, TimeUnit.SECONDS).applied()).isTrue();
    Execution<String> repeat = second.get(10, TimeUnit.SECONDS);
    assertThat(repeat.replayed()).isTrue();
    assertThat(repeat.value()).isEqualTo(first.get().value());
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void aRepeatPastTheWaitBoundIsToldInFlightAndALaterRetryGetsTheReplay() throws Exception {
    IdempotencyKey key = IdempotencyKey.of("bound", UUID.randomUUID().toString());
    IdempotentExecutor executor = f.idem.executor().inFlightWait(Duration.ZERO).retryAfter(Duration.ofMillis(500)).build();
    CountDownLatch claimed = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    Future<Execution<String>> first = background.submit(() ->
        executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
          claimed.countDown();
          finish.await();
          return ExecutorFixture.pay(tx, key.value(), 1);
        }));
    claimed.await();
    AtomicInteger runs = new AtomicInteger();
    Execution<String> busy = executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      return "second";
    });
    assertThat(busy).isInstanceOfSatisfying(Execution.InFlight.class, i -> {
      assertThat(i.retryAfter()).isEqualTo(Duration.ofMillis(500));
      assertThat(i.key()).isEqualTo(key.toString());
    });
    assertThat(runs).hasValue(0);
    assertThat(f.events.of(dev.idem.event.IdemEvent.InFlight.class, key)).hasSize(1);
    finish.countDown();
    first.get(10, TimeUnit.SECONDS);
    assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> "third").value()).isEqualTo(first.get().value());
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void whenTheFirstCopyFailsTheBlockedRepeatRunsTheEffectItself() throws Exception {
    IdempotencyKey key = IdempotencyKey.of("fail", UUID.randomUUID().toString());
    IdempotentExecutor executor = f.idem.executor().inFlightWait(Duration.ofSeconds(20)).build();
    CountDownLatch claimed = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    Future<Object> first = background.submit(() -> {
      try {
        return executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
          ExecutorFixture.pay(tx, key.value(), 1);
          claimed.countDown();
          finish.await();
          throw new IOException("first copy failed");
        });
      } catch (IOException e) {
        return e;
      }
    });
    claimed.await();
    Future<Execution<String>> second = background.submit(() ->
        executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 2)));
    LockWaits.await(f.db, 1); // the repeat waits on the first copy's key before that fails
    finish.countDown();
    assertThat(first.get(10, TimeUnit.SECONDS)).isInstanceOf(IOException.class);
    assertThat(second.get(10, TimeUnit.SECONDS).applied()).isTrue();
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.count("SELECT amount FROM payments WHERE request = '" + key.value() + "'")).isEqualTo(2);
  }
}
