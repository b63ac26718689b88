package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.ops.Operations;
import dev.idem.jdbc.ops.PartitionMaintenance;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Race;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TimedKeys;
import dev.idem.window.DedupeWindow;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import javax.sql.DataSource;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The partitioned layout (docs/scale.md): one claim per key across partitions, whenever a copy
 * arrives, keys without a time refused, and whole partitions dropped once their rows are past
 * their window. Every check counts rows in the database.
 */
// migrate = false: @IdemTest has no layout to choose; the class migrates in the partitioned one itself
@IdemTest(migrate = false, poolSize = 12, sql = "CREATE TABLE payments (key text NOT NULL, copy int NOT NULL)",
    vendors = TestDatabase.Vendor.POSTGRESQL, vendorsReason = "the partitioned layout (PostgreSQL's declarative"
        + " partitioning; IdemFlyway refuses Layout.PARTITIONED on MariaDB)")
class PartitionedLayoutTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;
  static IdempotentExecutor executor;
  static Inbox inbox;
  static Operations ops;

  /** A database in the partitioned layout, as a user chooses it at the first migration. */
  @BeforeAll
  static void migrateInThePartitionedLayout(TestDatabase database, DataSource pool) {
    db = database;
    ds = pool;
    IdemFlyway.migrate(pool, "idem", IdemFlyway.Layout.PARTITIONED);
    idem = Idem.builder(pool).build();
    executor = idem.executor().window(DedupeWindow.of(Duration.ofDays(1))).build();
    inbox = idem.inbox("billing").window(DedupeWindow.of(Duration.ofDays(1))).build();
    ops = idem.operations();
  }


  static Instant midnight(LocalDate day) {
    return day.atStartOfDay().toInstant(ZoneOffset.UTC);
  }

  static LocalDate today() {
    return LocalDate.ofInstant(Instant.ofEpochSecond(db.count("SELECT extract(epoch FROM clock_timestamp())::bigint")),
        ZoneOffset.UTC);
  }

  @Test
  void copiesOfKeysMintedEitherSideOfAPartitionBoundaryClaimOncePerKey() throws Exception {
    Instant boundary = midnight(today());
    List<IdempotencyKey> keys = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      // the last and first milliseconds of two days, and keys a few milliseconds away
      Instant t = boundary.plusMillis(i % 2 == 0 ? -1 - i / 2 : i / 2);
      keys.add(IdempotencyKey.of("shop", TimedKeys.uuidV7(t)));
    }
    for (IdempotencyKey key : keys) {
      List<Execution<String>> copies = Race.together(6, copy -> executor.execute(key, Fingerprint.of("pay"), Codec.utf8(),
          tx -> {
            tx.dsl().execute("INSERT INTO payments (key, copy) VALUES (?, ?)", key.value(), copy);
            return "paid by " + copy;
          }));
      assertThat(copies).filteredOn(Execution::applied).hasSize(1);
      assertThat(copies).extracting(Execution::value).containsOnly(copies.stream().filter(Execution::applied)
          .findFirst().orElseThrow().value());
    }
    for (IdempotencyKey key : keys) {
      assertThat(db.count("SELECT count(*) FROM payments WHERE key = ?", key.value())).as("effects of " + key).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE key = ?", key.value())).as("rows of " + key).isEqualTo(1);
      // filed under the day of the key's own time, not the day it arrived
      String day = LocalDate.ofInstant(Instant.ofEpochMilli(Long.parseLong(key.value().substring(0, 8)
          + key.value().substring(9, 13), 16)), ZoneOffset.UTC).toString().replace("-", "");
      assertThat(db.count("SELECT count(*) FROM idem_keys_p" + day + " WHERE key = ?", key.value())).isEqualTo(1);
    }
  }

  @Test
  void copiesRacingThePartitionsCreationStillClaimOnce() throws Exception {
    // A key minted 9 days ahead (a client clock far off): no partition yet. Its copies race the
    // maintenance that creates that day's partition: each is refused before, or claims after,
    // and the key is claimed once, its effect made once.
    LocalDate day = today().plusDays(9);
    db.execute("DROP TABLE IF EXISTS idem_keys_p" + day.toString().replace("-", ""));
    IdempotencyKey key = IdempotencyKey.of("shop", TimedKeys.uuidV7(midnight(day).plusSeconds(5)));
    List<String> outcomes = Race.together(8, copy -> {
      if (copy == 0) {
        return "created " + ops.maintainPartitions(Duration.ofDays(10), Duration.ofDays(1)).created();
      }
      for (int attempt = 0; ; attempt++) {
        try {
          Execution<String> e = executor.execute(key, Fingerprint.of("pay"), Codec.utf8(), tx -> {
            tx.dsl().execute("INSERT INTO payments (key, copy) VALUES (?, ?)", key.value(), copy);
            return "paid";
          });
          return e.applied() ? "applied" : "replayed";
        } catch (IllegalArgumentException noPartitionYet) {
          assertThat(noPartitionYet).hasMessageContaining("has no partition");
          if (attempt > 2000) {
            return "refused";
          }
        }
      }
    });
    assertThat(outcomes.get(0)).isNotEqualTo("created 0");
    assertThat(outcomes.subList(1, 8)).containsOnlyOnce("applied").doesNotContain("refused");
    assertThat(db.count("SELECT count(*) FROM payments WHERE key = ?", key.value())).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE key = ?", key.value())).isEqualTo(1);
  }

  @Test
  void inboxCopiesOfOneMessageAtTheBoundaryAreReceivedOnce() throws Exception {
    String id = TimedKeys.uuidV7(midnight(today()).minusMillis(1));
    db.execute("CREATE TABLE IF NOT EXISTS received (id text NOT NULL)");
    List<Execution<Void>> copies = Race.together(6, copy -> inbox.receive(id,
        tx -> tx.dsl().execute("INSERT INTO received (id) VALUES (?)", id)));
    assertThat(copies).filteredOn(Execution::applied).hasSize(1);
    assertThat(db.count("SELECT count(*) FROM received WHERE id = ?", id)).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE message_id = ?", id)).isEqualTo(1);
  }

  @Test
  void overlappingBatchesOfIdsEitherSideOfTheBoundaryApplyEachIdOnceInItsDaysPartition() throws Exception {
    db.execute("CREATE TABLE IF NOT EXISTS received (id text NOT NULL)");
    Instant boundary = midnight(today());
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < 40; i++) {
      ids.add(TimedKeys.uuidV7(boundary.plusMillis(i % 2 == 0 ? -1 - i / 2 : i / 2)));
    }
    // four consumers, each polling an overlapping window of 30 of the 40 ids, in its own order
    List<Integer> applied = Race.together(4, copy -> {
      List<String> batch = new ArrayList<>(ids.subList(copy * 3, copy * 3 + 30));
      java.util.Collections.rotate(batch, copy * 7);
      var received = inbox.receiveAll(batch, id -> id, (tx, id) -> tx.dsl().execute("INSERT INTO received (id) VALUES (?)", id));
      assertThat(received.failed()).isEmpty();
      return received.applied().size();
    });
    assertThat(applied.stream().mapToInt(Integer::intValue).sum()).isEqualTo(39); // ids 0..38 are in some batch
    for (String id : ids.subList(0, 39)) {
      assertThat(db.count("SELECT count(*) FROM received WHERE id = ?", id)).as("effects of " + id).isEqualTo(1);
      String day = LocalDate.ofInstant(Instant.ofEpochMilli(Long.parseLong(id.substring(0, 8) + id.substring(9, 13), 16)),
          ZoneOffset.UTC).toString().replace("-", "");
      assertThat(db.count("SELECT count(*) FROM idem_inbox_p" + day + " WHERE message_id = ?", id)).as("row of " + id).isEqualTo(1);
    }
    assertThatThrownBy(() -> inbox.receiveAll(List.of(TimedKeys.uuidV7(boundary.plusSeconds(3)), "msg-2"), id -> id, (tx, id) ->
        tx.dsl().execute("INSERT INTO received (id) VALUES (?)", id)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'msg-2' does not begin with a UUIDv7");
    assertThat(db.count("SELECT count(*) FROM received")).as("nothing of the refused batch").isEqualTo(39);
  }

  @Test
  void aNotificationWhoseIdCarriesItsRootsTimeIsSentOnceAndAPlainDerivedIdIsRefused() throws Exception {
    db.execute("CREATE TABLE IF NOT EXISTS sends (id text NOT NULL)");
    var receipts = idem.notifications("receipt").delivery(dev.idem.jdbc.notify.Delivery.AT_LEAST_ONCE_MAY_REPEAT).build();
    IdempotencyKey order = IdempotencyKey.of("shop", TimedKeys.uuidV7(midnight(today()).minusMillis(1)));
    String id = Keys.timedChild(order, "email/receipt").value();
    List<dev.idem.jdbc.notify.SendResult> copies = Race.together(4, copy -> receipts.send(
        new dev.idem.jdbc.notify.Notification(id, "email", "order-1"), out -> db.execute("INSERT INTO sends (id) VALUES ('" + id + "')")));
    assertThat(copies).filteredOn(r -> r instanceof dev.idem.jdbc.notify.SendResult.Sent).hasSize(1);
    assertThat(db.count("SELECT count(*) FROM sends WHERE id = ?", id)).isEqualTo(1);
    String plain = Keys.child(order, "email/receipt").value();
    assertThatThrownBy(() -> receipts.send(new dev.idem.jdbc.notify.Notification(plain, "email", "order-1"),
        out -> db.execute("INSERT INTO sends (id) VALUES ('" + plain + "')")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("does not begin with a UUIDv7");
    assertThat(db.count("SELECT count(*) FROM sends WHERE id = ?", plain)).isZero();
  }

  @Test
  void aKeyDerivedWithItsRootsTimeIsAcceptedInTheRootsPartition() throws Exception {
    IdempotencyKey root = IdempotencyKey.of("shop", TimedKeys.uuidV7(midnight(today()).minusMillis(1)));
    IdempotencyKey payment = Keys.timedChild(root, "payment");
    List<Execution<String>> copies = Race.together(4, copy -> executor.execute(payment, Fingerprint.of("pay"), Codec.utf8(),
        tx -> {
          tx.dsl().execute("INSERT INTO payments (key, copy) VALUES (?, ?)", payment.value(), copy);
          return "paid";
        }));
    assertThat(copies).filteredOn(Execution::applied).hasSize(1);
    assertThat(db.count("SELECT count(*) FROM payments WHERE key = ?", payment.value())).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys_p" + today().minusDays(1).toString().replace("-", "")
        + " WHERE key = ?", payment.value())).as("filed under the root's day").isEqualTo(1);
    assertThatThrownBy(() -> executor.execute(Keys.child(root, "payment"), Fingerprint.EMPTY, Codec.none(), tx -> null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("does not begin with a UUIDv7");
  }

  /**
   * Effects given as statements (the claim a function of the migration, its statements in the same
   * round trip): racing copies of a key and of an id either side of the boundary apply once, in the
   * day of their time; a later copy is replayed without its statements; a key without a time is
   * refused before the statements run, with nothing written.
   */
  @Test
  void effectsGivenAsStatementsClaimOncePerKeyAndRefuseKeysWithoutATime() throws Exception {
    Instant boundary = midnight(today());
    for (Instant t : List.of(boundary.minusMillis(1), boundary)) {
      IdempotencyKey key = IdempotencyKey.of("shop", TimedKeys.uuidV7(t));
      String id = TimedKeys.uuidV7(t);
      List<Execution<Void>> keyCopies = Race.together(6, copy -> executor.execute(key, Fingerprint.of("pay"),
          DSL.query("INSERT INTO payments (key, copy) VALUES (?, ?)", key.value(), copy)));
      List<Execution<Void>> idCopies = Race.together(6, copy -> inbox.receive(id,
          DSL.query("INSERT INTO payments (key, copy) VALUES (?, ?)", id, copy)));
      assertThat(keyCopies).filteredOn(Execution::applied).hasSize(1);
      assertThat(idCopies).filteredOn(Execution::applied).hasSize(1);
      assertThat(executor.execute(key, Fingerprint.of("pay"), DSL.query("INSERT INTO payments (key, copy) VALUES (?, 99)",
          key.value())).replayed()).isTrue();
      assertThat(inbox.receive(id, DSL.query("INSERT INTO payments (key, copy) VALUES (?, 99)", id)).replayed()).isTrue();
      String day = LocalDate.ofInstant(t, ZoneOffset.UTC).toString().replace("-", "");
      for (String k : List.of(key.value(), id)) {
        assertThat(db.count("SELECT count(*) FROM payments WHERE key = ?", k)).as("effects of " + k).isEqualTo(1);
      }
      assertThat(db.count("SELECT count(*) FROM idem_keys_p" + day + " WHERE key = ?", key.value())).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_inbox_p" + day + " WHERE message_id = ?", id)).isEqualTo(1);
    }
    assertThatThrownBy(() -> executor.execute(IdempotencyKey.of("shop", "order-43"), Fingerprint.EMPTY,
        DSL.query("INSERT INTO payments (key, copy) VALUES ('order-43', 0)")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'order-43' does not begin with a UUIDv7");
    assertThatThrownBy(() -> inbox.receive("msg-3", DSL.query("INSERT INTO payments (key, copy) VALUES ('msg-3', 0)")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'msg-3' does not begin with a UUIDv7");
    assertThat(db.count("SELECT count(*) FROM payments WHERE key IN ('order-43', 'msg-3')")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE key = 'order-43'")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE message_id = 'msg-3'")).isZero();
  }

  @Test
  void aKeyWithoutATimeIsRefusedAndNothingIsWritten() {
    IdempotencyKey key = IdempotencyKey.of("shop", "order-42");
    assertThatThrownBy(() -> executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      tx.dsl().execute("INSERT INTO payments (key, copy) VALUES ('order-42', 0)");
      return "x";
    })).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'order-42' does not begin with a UUIDv7");
    assertThatThrownBy(() -> executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> "x"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("does not begin with a UUIDv7");
    assertThatThrownBy(() -> inbox.receive("msg-1", tx -> { }))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'msg-1' does not begin with a UUIDv7");
    String upper = TimedKeys.uuidV7(Instant.now()).toUpperCase(Locale.ROOT);
    assertThatThrownBy(() -> executor.execute(IdempotencyKey.of("shop", upper), Fingerprint.EMPTY, Codec.none(), tx -> null))
        .as("the key's text decides its partition, byte by byte: an uppercase UUIDv7 would sort into another day")
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("does not begin with a UUIDv7 in lowercase");
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE upper(key) = ?", upper)).isZero();
    assertThat(db.count("SELECT count(*) FROM payments WHERE key = 'order-42'")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE key = 'order-42'")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE message_id = 'msg-1'")).isZero();
  }

  @Test
  void aPartitionIsDroppedOnlyOnceEveryRowIsPastItsWindowAndItsKeysAreThenRefusedNeverRunAgain() throws Exception {
    LocalDate old = today().minusDays(5);
    String part = "idem_keys_p" + old.toString().replace("-", "");
    db.execute(TimedKeys.keyPartitionOf(old));
    IdempotencyKey local = IdempotencyKey.of("shop", TimedKeys.uuidV7(midnight(old).plusSeconds(60)));
    IdempotencyKey external = IdempotencyKey.of("shop", TimedKeys.uuidV7(midnight(old).plusSeconds(120)));
    executor.execute(local, Fingerprint.of("pay"), Codec.utf8(), tx -> {
      tx.dsl().execute("INSERT INTO payments (key, copy) VALUES (?, 0)", local.value());
      return "paid";
    });
    IdempotentExecutor failing = idem.executor().window(DedupeWindow.of(Duration.ofDays(1))).build();
    assertThatThrownBy(() -> failing.executeExternal(external, Fingerprint.EMPTY, Codec.utf8(), a -> {
      throw new IOException("the provider timed out: the outcome is unknown");
    })).isInstanceOf(IOException.class);
    assertThat(executor.expire()).as("rows are not deleted one by one in this layout").isZero();

    assertThat(ops.maintainPartitions().dropped()).as("rows within their window").isZero();
    db.execute("UPDATE idem_keys SET expires_at = clock_timestamp() - interval '1 second' WHERE key IN ('"
        + local.value() + "', '" + external.value() + "')");
    assertThat(ops.maintainPartitions().dropped()).as("an external claim in flight: an unknown outcome").isZero();
    assertThat(db.count("SELECT count(*) FROM pg_class WHERE relname = '" + part + "'")).isEqualTo(1);

    db.execute("UPDATE idem_keys SET state = 'C', lease_expires_at = NULL WHERE key = '" + external.value() + "'");
    PartitionMaintenance run = ops.maintainPartitions();
    assertThat(run.dropped()).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM pg_class WHERE relname = '" + part + "'")).isZero();
    assertThat(ops.maintainPartitions().created()).as("a dropped day is never created again").isZero();

    // The repeat comes days later, as the moved window says: to an executor that has not answered
    // the key within the last seconds (this one would still answer it from memory, its row having
    // been completed and inside its window when it last saw it).
    IdempotentExecutor daysLater = idem.executor().window(DedupeWindow.of(Duration.ofDays(1))).build();
    assertThatThrownBy(() -> daysLater.execute(local, Fingerprint.of("pay"), Codec.utf8(), tx -> {
      tx.dsl().execute("INSERT INTO payments (key, copy) VALUES (?, 1)", local.value());
      return "paid again";
    })).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("has no partition");
    assertThat(db.count("SELECT count(*) FROM payments WHERE key = ?", local.value())).isEqualTo(1);
  }

  @Test
  void maintenanceRefusesBadArgumentsAndDoesNothingInTheDefaultLayout() {
    assertThatThrownBy(() -> ops.maintainPartitions(Duration.ofHours(1), Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("ahead must be within 1 and 366 days");
    assertThatThrownBy(() -> ops.maintainPartitions(Duration.ofDays(2), Duration.ofDays(-1)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("keep");
    // the default layout, in a schema of its own beside the partitioned one
    IdemFlyway.migrate(ds, "default_layout");
    PartitionMaintenance none = Idem.builder(ds).schema("default_layout").build().operations().maintainPartitions();
    assertThat(List.of(none.created(), none.dropped())).containsExactly(0, 0);
  }

  @Test
  void thePartitionedLayoutIsChosenOnEmptyTablesOnly() {
    // the default layout, in a schema of its own beside the partitioned one
    IdemFlyway.migrate(ds, "layout_switch");
    Idem.builder(ds).schema("layout_switch").build().executor().build()
        .execute(IdempotencyKey.of("s", "k"), Fingerprint.EMPTY, Codec.none(), tx -> null);
    long history = db.count("SELECT count(*) FROM layout_switch.idem_schema_history");
    assertThatThrownBy(() -> IdemFlyway.migrate(ds, "layout_switch", IdemFlyway.Layout.PARTITIONED))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("in the default layout")
        .hasMessageContaining("the layout is chosen at the first migration");
    assertThat(db.count("SELECT count(*) FROM layout_switch.idem_keys")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM layout_switch.idem_schema_history")).as("nothing migrated").isEqualTo(history);
  }

  @Test
  void aPartitionedInstallationIsNotMigratedAsADefaultOne() {
    assertThatThrownBy(() -> IdemFlyway.migrate(ds, "idem"))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("in the partitioned layout")
        .hasMessageContaining("pass Layout.PARTITIONED");
  }

  @Test
  void anEmptyDefaultInstallationStillRefusesTheOtherLayoutAtTheStart() {
    // the default layout, in a schema of its own beside the partitioned one
    IdemFlyway.migrate(ds, "layout_switch_empty");
    assertThatThrownBy(() -> IdemFlyway.migrate(ds, "layout_switch_empty", IdemFlyway.Layout.PARTITIONED))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("in the default layout");
  }
}
