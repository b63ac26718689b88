package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.fence.StaleFenceException;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.VendorSql;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * External mode on a pool whose connections run at each isolation level. At REPEATABLE READ or
 * SERIALIZABLE its phase-1 and phase-3 statements run in auto-commit, each in a snapshot of its
 * own, so on PostgreSQL a statement that waited for another copy's write that then committed fails
 * with SQLSTATE 40001. Such a copy must get what it gets under READ COMMITTED (in flight, or
 * refused as stale), never an error, and the row must be the other copy's. READ UNCOMMITTED (MariaDB
 * reads other transactions' uncommitted rows there; PostgreSQL runs it as READ COMMITTED) must
 * give the same.
 */
@IdemTest(poolSize = 2, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class ExternalIsolationTest {
  static final Duration LEASE = Duration.ofSeconds(1);
  static ExecutorFixture f;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
  }

  /** Another copy's takeover of the key's ended lease. */
  static String takeOver() {
    return "UPDATE idem_keys k SET fence = fence + 1, lease_expires_at = " + f.clockPlus(Duration.ofSeconds(30))
        + " WHERE k.scope = ? AND k.key = ?";
  }

  /** An executor on {@code pool}, answering "in flight" at once. */
  static IdempotentExecutor executorOn(HikariDataSource pool) {
    return Idem.builder(pool).build().executor().lease(LEASE).inFlightWait(Duration.ZERO).build();
  }

  static IdempotencyKey newKey() {
    return IdempotencyKey.of("checkout", UUID.randomUUID().toString());
  }

  /** Waits until a backend waits on a row or index lock of the key table. */
  static void awaitWaitOnTheKeyTable() throws InterruptedException {
    LockWaits.await(f.db, 1, "%idem_keys%");
  }

  static <T> CompletableFuture<T> async(Callable<T> work) {
    return CompletableFuture.supplyAsync(() -> {
      try {
        return work.call();
      } catch (Exception e) {
        throw new CompletionException(e);
      }
    });
  }

  static void run(Connection c, String sql, IdempotencyKey key) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, key.scope());
      ps.setString(2, key.value());
      ps.executeUpdate();
    }
  }

  /**
   * A copy at {@code isolation} calls while another copy's {@code write} to the key's row is
   * uncommitted; the other commits once the copy waits on it. Returns what the copy got.
   */
  static Execution<String> copyBehind(String isolation, IdempotencyKey key, String write) throws Exception {
    try (HikariDataSource pool = f.db.dataSource(4, isolation); Connection other = f.ds.getConnection()) {
      IdempotentExecutor executor = executorOn(pool);
      other.setAutoCommit(false);
      run(other, write, key);
      CompletableFuture<Execution<String>> copy = CompletableFuture.supplyAsync(() ->
          executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> "called"));
      awaitWaitOnTheKeyTable();
      other.commit();
      return copy.get(10, TimeUnit.SECONDS);
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ", "TRANSACTION_SERIALIZABLE"})
  void aClaimThatWaitedOnAnotherCopysClaimIsInFlight(String isolation) throws Exception {
    IdempotencyKey key = newKey();
    // another copy's phase 1: the key in flight with a live lease
    Execution<String> got = copyBehind(isolation, key, f.inFlightRow(VendorSql.emptyFingerprint(f.db), Duration.ofSeconds(30),
        "other-copy", Duration.ZERO, Duration.ofDays(1)));
    assertThat(got).isInstanceOf(Execution.InFlight.class);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, "call_key")).isEqualTo("other-copy");
  }

  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ", "TRANSACTION_SERIALIZABLE"})
  void aTakeoverThatWaitedOnAnotherCopysTakeoverIsInFlight(String isolation) throws Exception {
    IdempotencyKey key = newKey();
    f.insertInFlight(key, VendorSql.emptyFingerprint(f.db), Duration.ofSeconds(-1), "crashed-copy", Duration.ZERO, Duration.ofDays(1));
    assertThat(copyBehind(isolation, key, takeOver())).isInstanceOf(Execution.InFlight.class);
    assertThat(f.column(key, "fence")).isEqualTo("2");
    assertThat(f.column(key, "state")).isEqualTo("I");
  }

  /**
   * Eight copies of one external call racing on real connections at {@code isolation}: one claims
   * the key and calls the provider; the others are answered in flight while its lease lives and
   * send again until it has recorded, then get its result. One call, one charge, one row.
   */
  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ", "TRANSACTION_SERIALIZABLE"})
  void copiesRacingOnOneKeyCallTheProviderOnceAndAllGetItsResult(String isolation) throws Exception {
    IdempotencyKey key = newKey();
    IdempotentExecutor executor = Idem.builder(dev.idem.jdbc.Racers.pool(f.db, 8, isolation)).build().executor()
        .lease(Duration.ofSeconds(30)).inFlightWait(Duration.ofSeconds(10)).build();
    java.util.concurrent.atomic.AtomicInteger calls = new java.util.concurrent.atomic.AtomicInteger();
    java.util.List<Execution<String>> results = dev.idem.testing.Race.together(8, i -> {
      for (int attempt = 1; ; attempt++) {
        Execution<String> e = executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
          calls.incrementAndGet();
          return Provider.charge(f.ds, a.callKey().value(), 5);
        });
        if (!e.inFlight() || attempt == 100) {
          return e;
        }
        Thread.sleep(20); // a client's retry after "in flight"
      }
    });
    assertThat(results).noneMatch(Execution::inFlight);
    assertThat(results).filteredOn(Execution::applied).hasSize(1);
    assertThat(results).extracting(Execution::value).containsOnly(results.get(0).value());
    assertThat(calls).hasValue(1);
    String callKey = dev.idem.key.Keys.child(key, "external").value();
    assertThat(f.count("SELECT count(*) FROM provider_charges WHERE call_key = ?", callKey)).as("charges").isEqualTo(1);
    assertThat(f.count("SELECT calls FROM provider_charges WHERE call_key = ?", callKey)).as("calls at the provider").isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
  }

  /**
   * A holder at {@code isolation} calls out; during its call another transaction runs {@code write}
   * on the key's row (once the holder's lease has ended, by the database clock, if {@code
   * afterLeaseEnds}) and keeps it uncommitted; the call answers "charged", the holder's phase-3
   * record waits on that write, and the write commits. Returns what the holder got.
   */
  static Execution<String> recordBehind(String isolation, IdempotencyKey key, String write, boolean afterLeaseEnds)
      throws Exception {
    CountDownLatch calling = new CountDownLatch(1);
    CountDownLatch answer = new CountDownLatch(1);
    try (HikariDataSource pool = f.db.dataSource(4, isolation); Connection other = f.ds.getConnection()) {
      IdempotentExecutor executor = executorOn(pool);
      CompletableFuture<Execution<String>> holder = async(() ->
          executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> {
            calling.countDown();
            answer.await(10, TimeUnit.SECONDS);
            return "charged";
          }));
      assertThat(calling.await(10, TimeUnit.SECONDS)).isTrue();
      other.setAutoCommit(false);
      if (afterLeaseEnds) {
        Poll.until("the holder's lease over on the database clock", () -> f.leaseEnded(key));
      }
      run(other, write, key);
      answer.countDown();
      awaitWaitOnTheKeyTable();
      other.commit();
      return holder.get(10, TimeUnit.SECONDS);
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ", "TRANSACTION_SERIALIZABLE"})
  void aRecordThatWaitedOnATakeoverIsRefusedAsStale(String isolation) {
    IdempotencyKey key = newKey();
    // another copy takes over once the holder's lease has ended
    assertThatThrownBy(() -> recordBehind(isolation, key, takeOver(), true))
        .hasCauseInstanceOf(StaleFenceException.class);
    assertThat(f.column(key, "state")).isEqualTo("I");
    assertThat(f.column(key, "fence")).isEqualTo("2");
    assertThat(f.column(key, "result")).isNull();
  }

  /**
   * Phase 3 waits on another transaction's write to the key's row that leaves the holder's token in
   * place (here a no-op update; at SERIALIZABLE a conflict on index pages alone does the same). The
   * write fails with 40001 once the other commits; the holder is still the highest, so the record is
   * written again, never refused as stale.
   */
  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ", "TRANSACTION_SERIALIZABLE"})
  void aRecordThatWaitedOnAWriteLeavingItsTokenIsRecorded(String isolation) throws Exception {
    IdempotencyKey key = newKey();
    assertThat(recordBehind(isolation, key, "UPDATE idem_keys k SET call_key = call_key WHERE k.scope = ? AND k.key = ?",
        false)).isEqualTo(new Execution.Applied<>("charged"));
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "fence")).isEqualTo("1");
    assertThat(f.column(key, f.resultText())).isEqualTo("charged");
  }
}
