package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.event.IdemEvent;
import dev.idem.jdbc.Idem;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.io.IOException;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Keys are remembered for their window, by the database clock, and then forgotten in batches. */
@IdemTest(poolSize = 4, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class ExpiryTest {
  static ExecutorFixture f;
  static boolean maria;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
    maria = db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  /** The database clock {@code seconds} from now, in test SQL (MariaDB's times are UTC DATETIMEs). */
  static String clockPlus(int seconds) {
    return maria ? "(utc_timestamp(6) + interval " + seconds + " second)" : "(clock_timestamp() + interval '" + seconds + " seconds')";
  }

  /** The fence floor: PostgreSQL's sequence, MariaDB's one row. */
  static long floor() {
    return f.count(maria ? "SELECT floor FROM idem_fence_floor WHERE id = 1" : "SELECT last_value FROM idem_fence_floor");
  }

  /** The key's stored result as text. */
  static String result(IdempotencyKey key) {
    return f.column(key, maria ? "cast(result as char character set utf8mb4)" : "convert_from(result, 'UTF8')");
  }

  @Test
  void aRepeatAfterTheWindowRunsAgainAndReclaimsTheRowForTheNewIntent() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(700))).build();
    IdempotencyKey key = IdempotencyKey.of("expiry", UUID.randomUUID().toString());
    Execution<String> first = shortMemory.execute(key, Fingerprint.of("a"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
    Execution<String> within = shortMemory.execute(key, Fingerprint.of("a"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
    assertThat(within.replayed()).isTrue();
    f.awaitPastWindow(key); // the database's clock moves past the window
    // Past the window the key is free, even for another request, and even before expire() ran.
    Execution<String> after = shortMemory.execute(key, Fingerprint.of("b"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 2));
    assertThat(after.applied()).isTrue();
    assertThat(after.value()).isNotEqualTo(first.value());
    assertThat(f.payments(key.value())).isEqualTo(2);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, maria ? "lower(hex(fingerprint))" : "encode(fingerprint, 'hex')")).as("the new intent's request")
        .isEqualTo(Fingerprint.of("b").hex().substring(0, 32));
    assertThat(f.column(key, "fence")).as("a local effect's row carries no fencing token").isNull();
    assertThat(result(key)).isEqualTo(after.value());
  }

  @Test
  void aKeyThatMovesBetweenExternalAndLocalLivesNeverHandsOutATokenTwice() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(500)))
        .lease(Duration.ofMillis(200)).build();
    IdempotencyKey key = IdempotencyKey.of("expiry", UUID.randomUUID().toString());
    long first = Long.parseLong(shortMemory.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(),
        a -> "" + a.token().value()).value());
    f.awaitPastWindow(key);
    Execution<String> local = shortMemory.execute(key, Fingerprint.of("local"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
    assertThat(local.applied()).isTrue();
    assertThat(f.column(key, "fence")).as("a local life after an external one raises the token: its holder is stale")
        .isEqualTo("" + (first + 1));
    f.awaitPastWindow(key);
    long third = Long.parseLong(shortMemory.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(),
        a -> "" + a.token().value()).value());
    assertThat(third).as("above every token of the key's earlier lives").isGreaterThan(first);
    assertThat(f.column(key, "fence")).isEqualTo("" + third);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  @Test
  void anExternalClaimPastItsWindowIsReclaimedForTheNewIntent() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(500)))
        .lease(Duration.ofMillis(200)).build();
    IdempotencyKey key = IdempotencyKey.of("expiry", UUID.randomUUID().toString());
    Execution<String> first = shortMemory.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> "" + a.token().value());
    f.awaitPastWindow(key);
    Execution<String> again = shortMemory.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> "" + a.token().value());
    assertThat(again.applied()).isTrue();
    // the new intent's token is above the last one (and above the fence floor other tests raised)
    assertThat(Long.parseLong(again.value())).isGreaterThan(Long.parseLong(first.value()));
    assertThat(f.column(key, "fence")).isEqualTo(again.value());
  }

  @Test
  void aStalledExternalHolderCannotRecordOverTheNextIntentAfterExpiry() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(500)))
        .lease(Duration.ofMillis(300)).build();
    IdempotencyKey key = IdempotencyKey.of("expiry", UUID.randomUUID().toString());
    java.util.concurrent.CountDownLatch stalled = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch wake = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CompletableFuture<Execution<String>> a = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
      try {
        return shortMemory.executeExternal(key, Fingerprint.of("intent A"), Codec.utf8(), attempt -> {
          stalled.countDown();
          wake.await(); // a pause past the lease and the window
          return "A's result";
        });
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });
    stalled.await();
    f.awaitPastWindow(key); // past the lease and the window, by the database clock
    shortMemory.expire();
    Execution<String> c = shortMemory.executeExternal(key, Fingerprint.of("intent C"), Codec.utf8(), attempt -> "C's result");
    wake.countDown();

    assertThat(c.value()).isEqualTo("C's result");
    assertThat(a).failsWithin(Duration.ofSeconds(10))
        .withThrowableOfType(java.util.concurrent.ExecutionException.class)
        .withCauseInstanceOf(dev.idem.fence.StaleFenceException.class);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(result(key)).isEqualTo("C's result");
    assertThat(Long.parseLong(f.column(key, "fence"))).isGreaterThan(1);
  }

  @Test
  void aCompletedExternalKeyIsDeletedAndItsNextIntentGetsATokenAboveEveryStaleHolders() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(500)))
        .lease(Duration.ofMillis(200)).build();
    IdempotencyKey key = IdempotencyKey.of("retention", UUID.randomUUID().toString());
    CountDownLatch stalled = new CountDownLatch(1);
    CountDownLatch wake = new CountDownLatch(1);
    AtomicLong staleToken = new AtomicLong();
    CompletableFuture<Execution<String>> a = CompletableFuture.supplyAsync(() -> {
      try {
        return shortMemory.executeExternal(key, Fingerprint.of("intent A"), Codec.utf8(), attempt -> {
          staleToken.set(attempt.token().value());
          stalled.countDown();
          wake.await(); // stalls past its lease, past the takeover, past the window and the delete
          return "A's late result";
        });
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });
    stalled.await();
    f.awaitLeaseOver(key); // A's lease ends: B takes over and completes
    Execution<String> b = shortMemory.executeExternal(key, Fingerprint.of("intent A"), Codec.utf8(), attempt -> "B by " + attempt.token().value());
    long bToken = Long.parseLong(b.value().substring("B by ".length()));
    assertThat(bToken).isGreaterThan(staleToken.get());
    f.awaitPastWindow(key); // past the window
    assertThat(shortMemory.expire()).isGreaterThanOrEqualTo(1);
    assertThat(f.keyRows(key)).as("the completed external key is deleted").isZero();
    assertThat(floor()).isGreaterThanOrEqualTo(bToken);

    Execution<String> d = shortMemory.executeExternal(key, Fingerprint.of("intent D"), Codec.utf8(), attempt -> "" + attempt.token().value());
    wake.countDown();

    assertThat(d.applied()).isTrue();
    assertThat(Long.parseLong(d.value())).as("the re-created key's token").isGreaterThan(bToken);
    assertThat(a).failsWithin(Duration.ofSeconds(10)).withThrowableOfType(ExecutionException.class)
        .withCauseInstanceOf(dev.idem.fence.StaleFenceException.class);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(result(key)).isEqualTo(d.value());
    assertThat(f.column(key, "fence")).isEqualTo(d.value());
  }

  @Test
  void aClaimThatReadTheFloorBeforeExpiryDeletedTheKeyClaimsAgainAboveIt() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(1))).build();
    IdempotencyKey key = IdempotencyKey.of("retention", UUID.randomUUID().toString());
    shortMemory.executeExternal(key, Fingerprint.of("first"), Codec.utf8(), attempt -> "first");
    // Many takeovers in its life: the row's fence is far above the floor a new claim would read now.
    f.sql("UPDATE idem_keys SET fence = " + (floor() + 50) + ", expires_at = " + clockPlus(-1)
        + " WHERE idem_keys.key = '" + key.value() + "'");
    long deletedFence = Long.parseLong(f.column(key, "fence"));
    try (Connection gate = f.ds.getConnection()) {
      gate.setAutoCommit(false);
      CompletableFuture<Long> expiry;
      CompletableFuture<Execution<String>> d;
      try (Statement st = gate.createStatement()) {
        if (maria) {
          // Holds the floor's row, so expiry's batch waits to raise the floor: before it deletes
          // anything, since its raise commits first.
          st.execute("SELECT floor FROM idem_fence_floor WHERE id = 1 FOR UPDATE");
          expiry = CompletableFuture.supplyAsync(shortMemory::expire);
          CompletableFuture<Long> running = expiry;
          Poll.until("expiry waits to raise the floor", () -> waiting(running, "%update%idem_fence_floor%"));
          assertThat(f.keyRows(key)).as("nothing deleted before the floor is raised").isEqualTo(1);
          // A new intent now finds the row past its window, or, once expiry deleted it, inserts
          // reading the floor expiry raised.
          d = CompletableFuture.supplyAsync(() ->
              shortMemory.executeExternal(key, Fingerprint.of("second"), Codec.utf8(), attempt -> "" + attempt.token().value()));
        } else {
          // Holds the floor's lock, so expiry's batch deletes the row and then waits to raise the
          // floor, its delete not committed yet.
          st.execute("SELECT pg_advisory_xact_lock(hashtext('idem.idem_fence_floor'))");
          expiry = CompletableFuture.supplyAsync(shortMemory::expire);
          CompletableFuture<Long> running = expiry;
          Poll.until("expiry waits to raise the floor", () -> waiting(running, "%idem_raise_fence_floor%"));
          // A new intent reads the floor now, before it is raised, and waits on the row being deleted.
          d = CompletableFuture.supplyAsync(() ->
              shortMemory.executeExternal(key, Fingerprint.of("second"), Codec.utf8(), attempt -> "" + attempt.token().value()));
          CompletableFuture<Execution<String>> claim = d;
          Poll.until("the new claim waits on the row being deleted", () -> waiting(claim, "%insert into%idem_keys%"));
        }
      }
      gate.commit(); // expiry raises the floor and commits; the claim's insert goes ahead
      long expired = expiry.get(10, TimeUnit.SECONDS);
      if (!maria) {
        assertThat(expired).isGreaterThanOrEqualTo(1);
      }
      Execution<String> second = d.get(10, TimeUnit.SECONDS);
      assertThat(second.applied()).isTrue();
      assertThat(Long.parseLong(second.value())).as("above every token of the deleted row").isGreaterThan(deletedFence);
    }
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(Long.parseLong(f.column(key, "fence"))).isGreaterThan(deletedFence);
  }

  /**
   * Whether one session of this database waits on a lock running a statement like {@code query},
   * for {@code work}, which must not have ended (its failure is thrown at once, not after the poll).
   */
  private static boolean waiting(CompletableFuture<?> work, String query) {
    if (work.isDone()) {
      throw new AssertionError("ended instead of waiting on a lock: " + work.handle((v, e) -> e != null ? e : v).join());
    }
    // MariaDB: the statement still running, where only a lock holds it (the processlist is current
    // at every read, where InnoDB refreshes information_schema.innodb_trx only when it was not read
    // for 0.1 s, so a poll as fast as this one could keep seeing a stale copy)
    return maria
        ? f.count("SELECT count(*) FROM information_schema.processlist WHERE db = database() AND command = 'Query'"
            + " AND id <> connection_id() AND lower(info) LIKE ?", query) == 1
        : f.count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            + " AND lower(query) LIKE ?", query) == 1;
  }

  @Test
  void expireInsideATransactionStillCommitsEachBatchOnItsOwn() throws Exception {
    String scope = "own-" + UUID.randomUUID().toString().substring(0, 8);
    IdempotentExecutor executor = f.idem.executor().expiryBatches(3, 10).build();
    for (int i = 0; i < 7; i++) {
      executor.execute(IdempotencyKey.of(scope, "k-" + i), Fingerprint.EMPTY, Codec.none(), tx -> null);
    }
    f.sql("UPDATE idem_keys SET expires_at = " + clockPlus(-1) + " WHERE scope = '" + scope + "'");
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> f.idem.useTransaction(tx -> {
      assertThat(executor.expire()).isGreaterThanOrEqualTo(7);
      throw new IllegalStateException("the caller's transaction rolls back");
    })).hasMessageContaining("rolls back");
    assertThat(f.count("SELECT count(*) FROM idem_keys WHERE scope = '" + scope + "'")).isZero();
  }

  @Test
  void expireSkipsARowTheCallersOwnTransactionHoldsInsteadOfWaitingForIt() throws Exception {
    String scope = "held-" + UUID.randomUUID().toString().substring(0, 8);
    IdempotentExecutor executor = f.idem.executor().build();
    for (int i = 0; i < 3; i++) {
      executor.execute(IdempotencyKey.of(scope, "k-" + i), Fingerprint.EMPTY, Codec.none(), tx -> null);
    }
    f.sql("UPDATE idem_keys SET expires_at = " + clockPlus(-1) + " WHERE scope = '" + scope + "'");
    java.util.concurrent.CompletableFuture<Void> caller = java.util.concurrent.CompletableFuture.runAsync(() ->
        f.idem.useTransaction(tx -> {
          // the caller holds one expired row (as a re-claim of it would), then expires keys
          tx.dsl().execute("SELECT 1 FROM idem_keys k WHERE k.scope = ? AND k.key = 'k-0' FOR UPDATE", scope);
          executor.expire();
        }));
    try {
      caller.get(10, java.util.concurrent.TimeUnit.SECONDS);
    } catch (java.util.concurrent.TimeoutException waitingOnItself) {
      cancelLockWaits();
      throw new AssertionError("expire() waited on a row its caller's own transaction holds");
    }
    assertThat(f.count("SELECT count(*) FROM idem_keys k WHERE k.scope = '" + scope + "' AND k.key = 'k-0'")).isEqualTo(1);
    assertThat(f.count("SELECT count(*) FROM idem_keys WHERE scope = '" + scope + "'")).isEqualTo(1);
  }

  /** Cancels this database's statements waiting on a lock (MariaDB: every one running), so a failed test does not hang the class. */
  private static void cancelLockWaits() throws java.sql.SQLException {
    if (!maria) {
      f.sql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
      return;
    }
    try (Connection c = f.ds.getConnection(); Statement st = c.createStatement();
        java.sql.ResultSet rs = st.executeQuery("SELECT id FROM information_schema.processlist"
            + " WHERE db = database() AND command = 'Query' AND id <> connection_id()")) {
      java.util.List<Long> ids = new java.util.ArrayList<>();
      while (rs.next()) {
        ids.add(rs.getLong(1));
      }
      for (long id : ids) {
        f.sql("KILL QUERY " + id);
      }
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ",
      "TRANSACTION_SERIALIZABLE"})
  void atEveryIsolationLevelExpiryDeletesWhatIsPastSkipsAHeldRowAndRaisesTheFloor(String isolation) throws Exception {
    try (HikariDataSource pool = f.db.dataSource(3, isolation)) {
      IdempotentExecutor executor = Idem.builder(pool).build().executor().window(DedupeWindow.of(Duration.ofHours(1)))
          .expiryBatches(2, 10).build();
      String scope = "iso-" + UUID.randomUUID().toString().substring(0, 8);
      for (int i = 0; i < 4; i++) {
        executor.execute(IdempotencyKey.of(scope, "k-" + i), Fingerprint.EMPTY, Codec.none(), tx -> null);
      }
      IdempotencyKey external = IdempotencyKey.of(scope, "external");
      executor.executeExternal(external, Fingerprint.EMPTY, Codec.utf8(), attempt -> "done");
      long highest = floor() + 7; // a fence above the floor, as many takeovers leave it
      f.sql("UPDATE idem_keys SET fence = " + highest + " WHERE scope = '" + scope + "' AND idem_keys.key = 'external'");
      f.sql("UPDATE idem_keys SET expires_at = " + clockPlus(-1) + " WHERE scope = '" + scope + "'");
      try (Connection holder = pool.getConnection()) {
        holder.setAutoCommit(false);
        try (Statement st = holder.createStatement()) {
          st.execute("SELECT 1 FROM idem_keys k WHERE k.scope = '" + scope + "' AND k.key = 'k-0' FOR UPDATE");
        }
        while (executor.expire() > 0) {
          // batches of two, until only what is held (and other tests' live keys) is left
        }
        holder.rollback();
      }
      assertThat(f.count("SELECT count(*) FROM idem_keys k WHERE k.scope = '" + scope + "' AND k.key = 'k-0'"))
          .as("the held row, skipped").isEqualTo(1);
      assertThat(f.count("SELECT count(*) FROM idem_keys WHERE scope = '" + scope + "'")).isEqualTo(1);
      assertThat(floor()).as("raised to the deleted row's fence").isGreaterThanOrEqualTo(highest);
      while (executor.expire() > 0) {
        // the row no longer held
      }
      assertThat(f.count("SELECT count(*) FROM idem_keys WHERE scope = '" + scope + "'")).as("released, then deleted").isZero();
    }
  }

  @Test
  void expireDeletesOnlyKeysPastTheirWindowInBoundedBatches() throws Exception {
    String scope = "batch-" + UUID.randomUUID().toString().substring(0, 8);
    IdempotentExecutor executor = f.idem.executor().window(DedupeWindow.of(Duration.ofHours(1))).expiryBatches(10, 2).build();
    for (int i = 0; i < 25; i++) {
      executor.execute(IdempotencyKey.of(scope, "old-" + i), Fingerprint.EMPTY, Codec.none(), tx -> null);
    }
    for (int i = 0; i < 5; i++) {
      executor.execute(IdempotencyKey.of(scope, "young-" + i), Fingerprint.EMPTY, Codec.none(), tx -> null);
    }
    // An external claim in flight past its window but inside its lease is kept.
    IdempotencyKey holding = IdempotencyKey.of(scope, "holding");
    IdempotentExecutor longLease = f.idem.executor().lease(Duration.ofHours(1)).build();
    try {
      longLease.executeExternal(holding, Fingerprint.EMPTY, Codec.utf8(), a -> {
        throw new IOException("stays in flight");
      });
    } catch (IOException expected) {
      // ending the lease is what the policy does; give it a live one again below
    }
    f.sql("UPDATE idem_keys SET lease_expires_at = " + clockPlus(3600) + " WHERE idem_keys.key = 'holding' AND scope = '" + scope + "'");
    // This test counts every key expire() deletes: the keys other tests of this class left (some
    // of them still to pass their short windows while it runs) are removed first.
    f.sql("DELETE FROM idem_keys WHERE scope <> '" + scope + "'");
    // Time passes for the old ones (the test moves their window's end instead of sleeping an hour).
    f.sql("UPDATE idem_keys SET expires_at = " + clockPlus(-1)
        + " WHERE scope = '" + scope + "' AND (idem_keys.key LIKE 'old-%' OR idem_keys.key = 'holding')");
    f.events.clear();

    assertThat(executor.expire()).as("two batches of ten at most").isEqualTo(20);
    assertThat(executor.expire()).isEqualTo(5);
    assertThat(executor.expire()).isZero();
    assertThat(f.count("SELECT count(*) FROM idem_keys k WHERE k.scope = '" + scope + "' AND k.key LIKE 'old-%'")).isZero();
    assertThat(f.count("SELECT count(*) FROM idem_keys k WHERE k.scope = '" + scope + "' AND k.key LIKE 'young-%'")).isEqualTo(5);
    assertThat(f.keyRows(holding)).isEqualTo(1);
    assertThat(f.events.of(IdemEvent.Expired.class)).extracting(IdemEvent.Expired::count).containsExactly(20L, 5L);
  }
}
