package dev.idem.jdbc.ops;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.ExternalAttempt;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The operator's actions change exactly the rows they name, fenced, and each is reported. */
@IdemTest(poolSize = 4)
class OperationsTest {
  static {
    // The build runs slf4j-simple at WARN; this test reads the INFO line. Read when the logger is
    // made (on Operations' first use), so set before that; see also ReconciliationTest.
    System.setProperty("org.slf4j.simpleLogger.log.dev.idem.operations", "info");
  }

  static TestDatabase db;
  static DataSource ds;
  /** The database clock in test SQL: PostgreSQL's clock_timestamp(), MariaDB's UTC time. */
  static String now;
  static final Actions events = new Actions();
  static Idem idem;
  static Operations ops;
  static IdempotentExecutor executor;
  static final Fingerprint FP = Fingerprint.of("charge 10");

  /** Records the operator's actions (RecordingListener records the executor's events only). */
  static final class Actions implements IdemListener {
    final java.util.List<IdemEvent.OperatorAction> seen = new java.util.concurrent.CopyOnWriteArrayList<>();

    @Override
    public void onOperatorAction(IdemEvent.OperatorAction event) {
      seen.add(event);
    }

    List<IdemEvent.OperatorAction> of(Class<IdemEvent.OperatorAction> type) {
      return List.copyOf(seen);
    }

    void clear() {
      seen.clear();
    }
  }

  @BeforeAll
  static void start(TestDatabase database, DataSource pool) {
    db = database;
    ds = pool;
    now = db.vendor() == TestDatabase.Vendor.MARIADB ? "utc_timestamp(6)" : "clock_timestamp()";
    idem = Idem.builder(ds).listener(events).build();
    ops = idem.operations();
    executor = idem.executor().lease(Duration.ofSeconds(30)).build();
  }

  /** A real stuck key: the call threw (a timeout at the provider), so its lease ended and it stays in flight. */
  static IdempotencyKey stuck(String name) {
    IdempotencyKey key = IdempotencyKey.of("ops", name);
    assertThatThrownBy(() -> executor.executeExternal(key, FP, Codec.utf8(), a -> {
      throw new IOException("read timed out");
    })).isInstanceOf(IOException.class);
    return key;
  }

  /** The key's row as "state fence call_key result" ("-" for no result), read column by column on either database. */
  static String row(IdempotencyKey key) {
    try (var c = ds.getConnection(); var ps = c.prepareStatement(
        "SELECT k.state, k.fence, k.call_key, k.result FROM idem_keys k WHERE k.scope = ? AND k.key = ?")) {
      ps.setString(1, key.scope());
      ps.setString(2, key.value());
      try (var rs = ps.executeQuery()) {
        if (!rs.next()) {
          return null;
        }
        byte[] result = rs.getBytes(4);
        return rs.getString(1) + " " + rs.getString(2) + " " + rs.getString(3) + " "
            + (result == null ? "-" : new String(result, StandardCharsets.UTF_8));
      }
    } catch (java.sql.SQLException e) {
      throw new AssertionError(e);
    }
  }

  static StuckKey listed(IdempotencyKey key) {
    return ops.stuckKeys(100).stream().filter(s -> s.key().equals(key)).findFirst().orElse(null);
  }

  @Test
  void aCallBlockedPastItsLeaseIsListedAsStuck() throws Exception {
    IdempotentExecutor shortLease = idem.executor().lease(Duration.ofMillis(200)).build();
    IdempotencyKey key = IdempotencyKey.of("ops", "blocked");
    CountDownLatch inCall = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    CompletableFuture<Void> holder = CompletableFuture.runAsync(() -> {
      try {
        shortLease.executeExternal(key, FP, Codec.utf8(), a -> {
          inCall.countDown();
          release.await();
          return "late";
        });
      } catch (Exception ignored) {
        // the late record may be refused or stored; this test is about the listing while it blocks
      }
    });
    assertThat(inCall.await(10, TimeUnit.SECONDS)).isTrue();
    Poll.until("the call's 200 ms lease over on the database clock", () -> db.count("SELECT count(*) FROM idem_keys"
        + " k WHERE k.scope = ? AND k.key = ? AND k.lease_expires_at < " + now, key.scope(), key.value()) == 1);
    StuckKey s = listed(key);
    assertThat(s).isNotNull();
    assertThat(s.fence()).isEqualTo(1);
    assertThat(s.leaseEndedAgo()).isPositive();
    assertThat(s.callKey()).isEqualTo(Keys.child(key, "external").value());
    assertThat(ops.unknownOutcomes().count()).isGreaterThanOrEqualTo(1);
    release.countDown();
    holder.get(10, TimeUnit.SECONDS);
  }

  @Test
  void releaseMakesTheNextRepeatCallAgainWithFencePlusOneAndTheSameCallKey() throws Exception {
    IdempotencyKey key = stuck("release");
    StuckKey s = listed(key);
    assertThat(s.fence()).isEqualTo(1);
    String callKey = Keys.child(key, "external").value();
    assertThat(row(key)).isEqualTo("I 1 " + callKey + " -");
    UnknownOutcomes before = ops.unknownOutcomes();
    assertThat(before.count()).isGreaterThanOrEqualTo(1);
    assertThat(before.oldest()).isPositive();

    assertThat(ops.release(key, 2)).as("a fence the key does not carry").isFalse();
    assertThat(row(key)).isEqualTo("I 1 " + callKey + " -");

    events.clear();
    String log = capturingStderr(() -> assertThat(ops.release(key, 1)).isTrue());
    assertThat(log).contains("operator action release on " + key + " fence 1: 1 row(s) changed");
    assertThat(events.of(IdemEvent.OperatorAction.class))
        .containsExactly(new IdemEvent.OperatorAction("operations", "release", key + " fence 1", 1));
    assertThat(row(key)).as("the row stays, its fence unchanged").isEqualTo("I 1 " + callKey + " -");

    AtomicReference<ExternalAttempt> seen = new AtomicReference<>();
    Execution<String> e = executor.executeExternal(key, FP, Codec.utf8(), a -> {
      seen.set(a);
      return "charged";
    });
    assertThat(e).isEqualTo(new Execution.Applied<>("charged"));
    assertThat(seen.get().token().value()).isEqualTo(2);
    assertThat(seen.get().callKey().value()).isEqualTo(callKey);
    assertThat(row(key)).isEqualTo("C 2 " + callKey + " charged");
    assertThat(listed(key)).isNull();
  }

  @Test
  void resolveMakesEveryRepeatAReplayAndAStaleFenceChangesNothing() throws Exception {
    IdempotencyKey key = stuck("resolve");
    IdempotencyKey other = stuck("resolve-other");
    String callKey = Keys.child(key, "external").value();

    events.clear();
    assertThat(ops.resolve(key, 7, "found".getBytes(StandardCharsets.UTF_8))).isFalse();
    assertThat(row(key)).isEqualTo("I 1 " + callKey + " -");
    assertThat(events.of(IdemEvent.OperatorAction.class)).extracting(IdemEvent.OperatorAction::rows).containsExactly(0L);

    // Another attempt takes over (fence 2) after the operator read fence 1: the operator's resolve is refused.
    StuckKey read = listed(key);
    assertThatThrownBy(() -> executor.executeExternal(key, FP, Codec.utf8(), a -> {
      throw new IOException("timed out again");
    })).isInstanceOf(IOException.class);
    assertThat(ops.resolve(key, read.fence(), Codec.utf8(), "found")).isFalse();
    assertThat(row(key)).isEqualTo("I 2 " + callKey + " -");

    assertThat(ops.resolve(key, 2, Codec.utf8(), "found")).isTrue();
    assertThat(row(key)).isEqualTo("C 2 " + callKey + " found");
    assertThat(row(other)).as("only the named key").isEqualTo("I 1 " + Keys.child(other, "external").value() + " -");
    AtomicInteger calls = new AtomicInteger();
    for (int i = 0; i < 3; i++) {
      Execution<String> e = executor.executeExternal(key, FP, Codec.utf8(), a -> {
        calls.incrementAndGet();
        return "called";
      });
      assertThat(e).isInstanceOf(Execution.Replayed.class);
      assertThat(((Execution.Replayed<String>) e).value()).isEqualTo("found");
    }
    assertThat(calls).hasValue(0);
  }

  @Test
  void redriveChangesExactlyTheParkedRowsItNames() {
    db.execute("DELETE FROM idem_outbox");
    List<UUID> ids = idem.inTransaction(tx -> idem.outbox().enqueueAll(tx.connection(), List.of(
        NewMessage.of("a", new byte[] {1}).withAggregateKey("k1"), NewMessage.of("a", new byte[] {2}).withAggregateKey("k2"),
        NewMessage.of("a", new byte[] {3}).withAggregateKey("k3"), NewMessage.of("b", new byte[] {4}).withAggregateKey("k4"))));
    try (var relay = idem.relay(m -> {
      throw new IllegalStateException("broker down");
    }).maxAttempts(1).build()) {
      relay.runOnce();
    }
    assertThat(ops.outboxStats()).isEqualTo(new OutboxStatsValue(0, 4, 0, Duration.ZERO));
    List<ParkedMessage> parked = ops.parked(10);
    assertThat(parked).extracting(ParkedMessage::id).containsExactlyInAnyOrderElementsOf(ids);
    assertThat(parked).allSatisfy(p -> {
      assertThat(p.attempts()).isEqualTo(1);
      assertThat(p.lastError()).contains("broker down");
      assertThat(p.parkedSince()).isNotNull();
    });
    assertThat(ops.parked(1)).hasSize(1);

    events.clear();
    assertThat(ops.redrive(ids.get(0))).isEqualTo(1);
    assertThat(statuses(ids)).isEqualTo("P X X X");
    assertThat(ops.redrive(ids.get(0))).as("no longer parked").isZero();
    assertThat(ops.redriveTopic("a")).isEqualTo(2);
    assertThat(statuses(ids)).isEqualTo("P P P X");
    OutboxStats stats = ops.outboxStats();
    assertThat(stats.pending()).isEqualTo(3);
    assertThat(stats.parked()).isEqualTo(1);
    assertThat(stats.oldestPending()).isPositive();
    assertThat(ops.redriveAll()).isEqualTo(1);
    assertThat(statuses(ids)).isEqualTo("P P P P");
    assertThat(events.of(IdemEvent.OperatorAction.class)).extracting(IdemEvent.OperatorAction::action, IdemEvent.OperatorAction::rows)
        .containsExactly(org.assertj.core.groups.Tuple.tuple("redrive", 1L), org.assertj.core.groups.Tuple.tuple("redrive", 0L),
            org.assertj.core.groups.Tuple.tuple("redriveTopic", 2L), org.assertj.core.groups.Tuple.tuple("redriveAll", 1L));
  }

  /** The messages' statuses in the order of {@code ids}, read by the ids' text (a uuid on PostgreSQL, CHAR(36) on MariaDB). */
  private static String statuses(List<UUID> ids) {
    java.util.Map<String, String> byId = new java.util.HashMap<>();
    try (var c = ds.getConnection(); var st = c.createStatement(); var rs = st.executeQuery("SELECT id, status FROM idem_outbox")) {
      while (rs.next()) {
        byId.put(rs.getString(1), rs.getString(2));
      }
    } catch (java.sql.SQLException e) {
      throw new AssertionError(e);
    }
    StringBuilder s = new StringBuilder();
    for (UUID id : ids) {
      s.append(s.length() == 0 ? "" : " ").append(byId.get(id.toString()));
    }
    return s.toString();
  }

  @Test
  void badInputIsRefusedNamingTheArgument() {
    IdempotencyKey k = IdempotencyKey.of("ops", "x");
    assertThatThrownBy(() -> ops.stuckKeys(0)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("limit");
    assertThatThrownBy(() -> ops.parked(10_001)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("limit");
    assertThatThrownBy(() -> ops.release(null, 1)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("key");
    assertThatThrownBy(() -> ops.release(k, -1)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fence");
    assertThatThrownBy(() -> ops.resolve(k, 1, (byte[]) null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("result");
    assertThatThrownBy(() -> ops.resolve(k, 1, null, "x")).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("codec");
    assertThatThrownBy(() -> ops.redrive(null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("id");
    assertThatThrownBy(() -> ops.redriveTopic(null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("topic");
  }

  /** What slf4j-simple (the tests' binding, which writes to System.err) printed while {@code r} ran. */
  static String capturingStderr(Runnable r) {
    PrintStream saved = System.err;
    ByteArrayOutputStream buf = new ByteArrayOutputStream();
    System.setErr(new PrintStream(buf, true, StandardCharsets.UTF_8));
    try {
      r.run();
    } finally {
      System.setErr(saved);
    }
    return buf.toString(StandardCharsets.UTF_8);
  }
}
