package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.VendorSql;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.result.Codec;
import dev.idem.result.CodecException;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.io.IOException;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Local effects, one call at a time: what each kind of repeat gets, and what the database holds. */
@IdemTest(poolSize = 6, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class LocalEffectTest {
  static ExecutorFixture f;
  static IdempotentExecutor executor;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
    executor = f.idem.executor().window(DedupeWindow.of(Duration.ofHours(1))).inFlightWait(Duration.ofMillis(300)).build();
  }

  static IdempotencyKey newKey() {
    return IdempotencyKey.of("merchant-1/payments", UUID.randomUUID().toString());
  }

  @Test
  void theFirstCallAppliesAndARepeatGetsTheStoredResultWithoutRunningTheEffect() throws Exception {
    IdempotencyKey key = newKey();
    String request = key.value();
    Fingerprint fp = Fingerprint.of("pay 100 to bob");
    AtomicInteger runs = new AtomicInteger();

    Execution<String> first = executor.execute(key, fp, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      return ExecutorFixture.pay(tx, request, 100);
    });
    Instant between = dbNow();
    Execution<String> second = executor.execute(key, fp, Codec.utf8(), tx -> {
      runs.incrementAndGet();
      return ExecutorFixture.pay(tx, request, 100);
    });

    assertThat(first).isInstanceOf(Execution.Applied.class);
    assertThat(second).isInstanceOf(Execution.Replayed.class);
    assertThat(second.value()).isEqualTo(first.value()).startsWith("payment-");
    Execution.Replayed<String> replay = (Execution.Replayed<String>) second;
    assertThat(replay.firstCompletedAt()).isBeforeOrEqualTo(between);
    // to the microsecond, the database's own time: a local row completes when it is created, and
    // keeps no completed_at of its own
    assertThat(f.column(key, "completed_at")).isNull();
    assertThat(replay.firstCompletedAt()).isEqualTo(java.time.Instant.EPOCH.plus(
        Long.parseLong(f.column(key, VendorSql.epochMicros(f.db, "created_at"))), java.time.temporal.ChronoUnit.MICROS));
    assertThat(replay.age()).isGreaterThanOrEqualTo(Duration.ZERO).isLessThan(Duration.ofMinutes(1));
    assertThat(runs).hasValue(1);
    assertThat(f.payments(request)).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, f.resultText())).isEqualTo(first.value());
    // The window is counted from the claim by the database clock.
    assertThat(f.column(key, VendorSql.microsBetween(f.db, "created_at", "expires_at"))).isEqualTo("3600000000");
    assertThat(f.events.of(IdemEvent.Applied.class, key)).hasSize(1);
    assertThat(f.events.of(IdemEvent.Replayed.class, key)).hasSize(1)
        .allSatisfy(e -> assertThat(e.windowUsed()).isBetween(0.0, 0.1));
  }

  /**
   * An effect that catches an SQL error of its own ("insert, ignore the duplicate") leaves
   * PostgreSQL's transaction aborted, and pgjdbc turns the COMMIT of such a transaction into a
   * rollback without an error. With nothing to store after the effect, the COMMIT is idem's only
   * statement left: it must not answer Applied for a transaction that is gone. (MariaDB rolls back
   * the failed statement alone; the transaction, and what the effect wrote, commit: Applied is
   * true there, with one payment and one key row.)
   */
  @Test
  void anEffectThatSwallowsAnSqlErrorIsNeverReportedAsApplied() throws Exception {
    if (f.maria()) {
      IdempotencyKey key = newKey();
      assertThat(f.idem.executor().build().execute(key, Fingerprint.EMPTY, Codec.<String>none(), tx -> {
        ExecutorFixture.pay(tx, key.value(), 5);
        try (Statement st = tx.connection().createStatement()) {
          st.execute("INSERT INTO no_such_table VALUES (1)");
        } catch (java.sql.SQLException ignored) {
          // the effect's own mistake: MariaDB undid that statement only
        }
        return null;
      }).applied()).isTrue();
      assertThat(f.payments(key.value())).isEqualTo(1);
      assertThat(f.keyRows(key)).isEqualTo(1);
      return;
    }
    {
      IdempotentExecutor ordered = f.idem.executor().build();
      for (Codec<String> codec : java.util.List.of(Codec.<String>none(), Codec.utf8())) {
        IdempotencyKey key = newKey();
        assertThatThrownBy(() -> ordered.execute(key, Fingerprint.EMPTY, codec, tx -> {
          ExecutorFixture.pay(tx, key.value(), 5);
          try (Statement st = tx.connection().createStatement()) {
            st.execute("INSERT INTO no_such_table VALUES (1)");
          } catch (java.sql.SQLException ignored) {
            // the effect's own mistake: the transaction is aborted from here on
          }
          return null;
        })).as("%s", codec).isInstanceOf(org.jooq.exception.DataAccessException.class);
        assertThat(f.payments(key.value())).as("%s", codec).isZero();
        assertThat(f.keyRows(key)).as("%s", codec).isZero();

        Execution<String> retry = ordered.execute(key, Fingerprint.EMPTY, codec, tx -> {
          ExecutorFixture.pay(tx, key.value(), 5);
          return null;
        });
        assertThat(retry.applied()).isTrue();
        assertThat(f.payments(key.value())).isEqualTo(1);
        assertThat(f.keyRows(key)).isEqualTo(1);
      }
    }
  }

  @Test
  void aBusinessFailureIsAResultStoredAndReplayed() throws Exception {
    IdempotencyKey key = newKey();
    Fingerprint fp = Fingerprint.of("card 4000-0000-0000-0002");
    Execution<String> first = executor.execute(key, fp, Codec.utf8(), tx -> {
      ExecutorFixture.pay(tx, key.value(), 0); // the decline is recorded too
      return "declined: insufficient funds";
    });
    Execution<String> second = executor.execute(key, fp, Codec.utf8(), tx -> "approved");
    assertThat(first.applied()).isTrue();
    assertThat(second.replayed()).isTrue();
    assertThat(second.value()).isEqualTo("declined: insufficient funds");
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void anExceptionRollsBackTheEffectAndFreesTheKeyForARetry() throws Exception {
    IdempotencyKey key = newKey();
    Fingerprint fp = Fingerprint.of("r");
    assertThatThrownBy(() -> executor.execute(key, fp, Codec.utf8(), tx -> {
      ExecutorFixture.pay(tx, key.value(), 5);
      throw new IOException("card network down");
    })).isInstanceOf(IOException.class).hasMessage("card network down");
    assertThat(f.payments(key.value())).isZero();
    assertThat(f.keyRows(key)).isZero();

    Execution<String> retry = executor.execute(key, fp, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 5));
    assertThat(retry.applied()).isTrue();
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void aRepeatWithAnotherFingerprintIsRefusedAndChangesNothing() throws Exception {
    IdempotencyKey key = newKey();
    executor.execute(key, Fingerprint.of("pay 100"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 100));
    String before = f.keyRow(key);
    AtomicInteger runs = new AtomicInteger();

    assertThatThrownBy(() -> executor.execute(key, Fingerprint.of("pay 900"), Codec.utf8(), tx -> {
      runs.incrementAndGet();
      return ExecutorFixture.pay(tx, key.value(), 900);
    })).isInstanceOfSatisfying(KeyReuseException.class, e -> {
      assertThat(e.key()).isEqualTo(key);
      assertThat(e.storedHex()).as("the 32 hex digits the key table keeps").isEqualTo(Fingerprint.of("pay 100").hex().substring(0, 32));
      assertThat(e.given()).isEqualTo(Fingerprint.of("pay 900"));
    });
    assertThat(runs).hasValue(0);
    assertThat(f.keyRow(key)).isEqualTo(before);
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.count("SELECT count(*) FROM payments WHERE request = '" + key.value() + "' AND amount = 900")).isZero();
    assertThat(f.events.of(IdemEvent.FingerprintMismatch.class, key)).hasSize(1);
  }

  /**
   * Keys are compared byte for byte on both databases (MariaDB's key columns are utf8mb4_bin, where
   * its default collations fold case and trailing spaces): values or scopes differing only by case
   * are distinct keys, each with its own row and effect; a trailing space is refused, never folded.
   */
  @Test
  void keysDifferingOnlyByCaseAreDistinct() throws Exception {
    String value = "Case-" + UUID.randomUUID();
    java.util.List<IdempotencyKey> keys = java.util.List.of(IdempotencyKey.of("tenant-c", value),
        IdempotencyKey.of("tenant-c", value.toLowerCase(java.util.Locale.ROOT)), IdempotencyKey.of("tenant-c", value.toUpperCase(java.util.Locale.ROOT)),
        IdempotencyKey.of("Tenant-C", value));
    for (IdempotencyKey key : keys) {
      assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, value, 1)).applied()).as("%s", key).isTrue();
    }
    for (IdempotencyKey key : keys) {
      assertThat(f.keyRows(key)).as("%s", key).isEqualTo(1);
      assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, value, 1)).replayed()).as("%s", key).isTrue();
    }
    assertThat(f.count("SELECT count(*) FROM payments WHERE request = '" + value + "'")).isEqualTo(4);
    assertThatThrownBy(() -> IdempotencyKey.of("tenant-c", value + " ")).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theSameValueInAnotherScopeIsAnotherKey() throws Exception {
    String value = UUID.randomUUID().toString();
    IdempotencyKey a = IdempotencyKey.of("tenant-a", value);
    IdempotencyKey b = IdempotencyKey.of("tenant-b", value);
    assertThat(executor.execute(a, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, value, 1)).applied()).isTrue();
    assertThat(executor.execute(b, Fingerprint.of("other"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, value, 2)).applied()).isTrue();
    assertThat(f.payments(value)).isEqualTo(2);
  }

  @Test
  void aResultTheCodecCannotEncodeRollsTheEffectBackAndSaysWhy() {
    IdempotencyKey key = newKey();
    Codec<String> broken = ExecutorFixture.unencodable();
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, broken, tx -> ExecutorFixture.pay(tx, key.value(), 7)))
        .isInstanceOf(CodecException.class)
        .hasMessageContaining(key.toString())
        .hasMessageContaining("BrokenCodec")
        .hasMessageContaining("no encoding for payment-")
        .hasMessageContaining("rolled back");
    assertThat(f.payments(key.value())).isZero();
    assertThat(f.keyRows(key)).isZero();
  }

  @Test
  void aStoredResultTheCodecCannotDecodeIsAnErrorAndTheEffectDoesNotRunAgain() throws Exception {
    IdempotencyKey key = newKey();
    executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 4));
    String before = f.keyRow(key);
    Codec<String> unreadable = new Codec<>() {
      @Override
      public byte[] encode(String value) {
        return value.getBytes();
      }

      @Override
      public String decode(byte[] bytes) {
        throw new IllegalStateException("schema v2 cannot read v1");
      }
    };
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, unreadable, tx -> ExecutorFixture.pay(tx, key.value(), 4)))
        .isInstanceOf(CodecException.class).hasMessageContaining("could not be decoded").hasMessageContaining("schema v2");
    assertThat(f.keyRow(key)).isEqualTo(before);
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  @Test
  void aCodecThatStoresNothingRecordsTheKeyAndReplaysNull() throws Exception {
    IdempotencyKey key = newKey();
    Execution<Object> first = executor.execute(key, Fingerprint.EMPTY, Codec.none(), tx -> ExecutorFixture.pay(tx, key.value(), 3));
    Execution<Object> second = executor.execute(key, Fingerprint.EMPTY, Codec.none(), tx -> ExecutorFixture.pay(tx, key.value(), 3));
    assertThat(first.applied()).isTrue();
    assertThat(second.replayed()).isTrue();
    assertThat(second.value()).isNull();
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "result")).isNull();
  }

  /**
   * PostgreSQL: the session's lock_timeout (0, off) is in force again in the effect. MariaDB: the
   * claim bounds only its own statement (SET STATEMENT innodb_lock_wait_timeout = n FOR ..), and the
   * effect runs under the session's value, the server's default.
   */
  @Test
  void theEffectDoesNotRunWithTheClaimsLockTimeout() throws Exception {
    IdempotencyKey key = newKey();
    String[] seen = new String[1];
    String show = f.maria() ? "SELECT CONCAT(@@session.innodb_lock_wait_timeout, '/', @@global.innodb_lock_wait_timeout)"
        : "SHOW lock_timeout";
    executor.execute(key, Fingerprint.EMPTY, Codec.none(), tx -> {
      try (Statement st = tx.connection().createStatement(); var rs = st.executeQuery(show)) {
        rs.next();
        seen[0] = rs.getString(1);
      }
      return null;
    });
    if (f.maria()) {
      assertThat(seen[0].split("/")).satisfies(v -> assertThat(v[0]).isEqualTo(v[1]));
    } else {
      assertThat(seen[0]).isEqualTo("0");
    }
  }

  @Test
  void badInputIsRefusedBeforeAnythingIsWritten() {
    long keysBefore = f.count("SELECT count(*) FROM idem_keys");
    IdempotencyKey key = newKey();
    assertThatThrownBy(() -> executor.execute(null, Fingerprint.EMPTY, Codec.utf8(), tx -> "x"))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("key must not be null");
    assertThatThrownBy(() -> executor.execute(key, null, Codec.utf8(), tx -> "x"))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("fingerprint must not be null");
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, null, tx -> "x"))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("codec must not be null");
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), null))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("effect must not be null");
    assertThatThrownBy(() -> executor.execute((Connection) null, key, Fingerprint.EMPTY, Codec.utf8(), tx -> "x"))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("callerTx must not be null");
    assertThatThrownBy(() -> executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), null))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("call must not be null");
    assertThatThrownBy(() -> executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> "x", null))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("resolver must not be null");
    // Keys and scopes are checked where they are made, before the executor sees them.
    assertThatThrownBy(() -> IdempotencyKey.of("tenant a", "k"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("scope contains a space");
    assertThatThrownBy(() -> IdempotencyKey.of("tenant", ""))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("value must not be empty");
    assertThatThrownBy(() -> IdempotencyKey.of("tenant", "x".repeat(256)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at most 255");
    assertThat(f.count("SELECT count(*) FROM idem_keys")).isEqualTo(keysBefore);
  }

  @Test
  void theBuilderRefusesBadSettingsNamingThem() {
    assertThatThrownBy(() -> f.idem.executor().window(null).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("window");
    assertThatThrownBy(() -> f.idem.executor().inFlightWait(Duration.ofSeconds(-1)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inFlightWait");
    assertThatThrownBy(() -> f.idem.executor().lease(Duration.ZERO).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("lease");
    assertThatThrownBy(() -> f.idem.executor().name("my executor").build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("name");
    assertThatThrownBy(() -> f.idem.executor().expiryBatches(0, 1).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("batch size");
  }

  @Test
  void theBuilderRefusesTimesTheDatabaseCannotHoldAndTheLongestItAcceptsWork() throws Exception {
    assertThatThrownBy(() -> f.idem.executor().inFlightWait(Duration.ofDays(30)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inFlightWait").hasMessageContaining("lock_timeout");
    assertThatThrownBy(() -> f.idem.executor().window(DedupeWindow.of(Duration.ofDays(365L * 200))).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("window");
    assertThatThrownBy(() -> f.idem.executor().lease(Duration.ofDays(365L * 200)).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("lease");
    IdempotentExecutor longest = f.idem.executor()
        .inFlightWait(Duration.ofMillis(Integer.MAX_VALUE)).window(DedupeWindow.of(Duration.ofDays(36_500))).build();
    IdempotencyKey key = IdempotencyKey.of("orders", "longest-" + UUID.randomUUID());
    assertThat(longest.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1)).applied()).isTrue();
    assertThat(f.payments(key.value())).isEqualTo(1);
    assertThat(f.count("SELECT count(*) FROM idem_keys k WHERE k.key = '" + key.value()
        + "' AND expires_at > " + f.clockPlus(Duration.ofDays(99 * 365 + 25)))).isEqualTo(1);
  }

  @Test
  void aListenerThatThrowsNeverBreaksTheCall() throws Exception {
    var loud = dev.idem.jdbc.Idem.builder(f.ds).listener(new dev.idem.event.IdemListener() {
      @Override
      public void onApplied(IdemEvent.Applied event) {
        throw new IllegalStateException("metrics down");
      }
    }).build();
    IdempotencyKey key = newKey();
    Execution<String> e = loud.executor().build().execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
    assertThat(e.applied()).isTrue();
    assertThat(f.payments(key.value())).isEqualTo(1);
  }

  /**
   * On MariaDB a schema is a database of the server: one named after this class's database, so no
   * other run shares it, dropped at the end.
   */
  @Test
  void keysLiveInTheConfiguredSchema() throws Exception {
    String schema = f.maria() ? f.db.name() + "_billing" : "billing_idem";
    try {
      var own = dev.idem.jdbc.Idem.builder(f.ds).schema(schema).build();
      IdemFlyway.migrate(f.ds, own.schema());
      IdempotentExecutor executor = own.executor().build();
      IdempotencyKey key = newKey();
      executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
      assertThat(executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> "again").replayed()).isTrue();
      assertThat(f.count("SELECT count(*) FROM " + schema + ".idem_keys k WHERE k.key = '" + key.value() + "'")).isEqualTo(1);
      assertThat(f.keyRows(key)).as("nothing in the default schema").isZero();
      assertThat(f.payments(key.value())).isEqualTo(1);
    } finally {
      if (f.maria()) {
        f.sql("DROP DATABASE IF EXISTS " + schema);
      }
    }
  }

  /** The database clock now, to the microsecond. */
  static Instant dbNow() {
    long micros = f.count("SELECT " + VendorSql.epochMicros(f.db, f.clock()));
    return Instant.EPOCH.plus(micros, java.time.temporal.ChronoUnit.MICROS);
  }
}
