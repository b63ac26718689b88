package dev.idem.jdbc.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import java.sql.Connection;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link OutboxLayout#DEBEZIUM}: the same enqueue calls write each message into {@code
 * idem_outbox_events} and delete it in the same transaction (what Debezium reads is the write-ahead
 * log; idem-debezium's test reads it through Debezium). Here, the rows the transaction wrote,
 * as the transaction itself sees them before it deletes them and as PostgreSQL counts them.
 */
@IdemTest(poolSize = 4, sql = "CREATE TABLE orders (id int NOT NULL)")
class OutboxEventsLayoutTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool) {
    db = database;
    ds = pool;
    idem = Idem.builder(ds).outboxLayout(OutboxLayout.DEBEZIUM).build();
  }

  /** One row as the router reads it. */
  record Event(UUID id, String aggregatetype, String aggregateid, String type, String payload, String headers) {}

  static boolean mariadb() {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  @Test
  void eachMessageIsInsertedInTheRoutersShapeAndDeletedInTheSameTransaction() throws java.sql.SQLException {
    Assumptions.assumeTrue(!mariadb(), "the Debezium layout is PostgreSQL only: onMariaDbTheLayoutIsRefusedAtTheFirstEnqueue");
    List<UUID> ids = new ArrayList<>();
    List<Event> seen = new ArrayList<>();
    long[] insertedDeleted = idem.inTransaction(tx -> {
      // a trigger keeps a copy of what the insert wrote, before the delete: the row as Debezium decodes it
      tx.dsl().execute("CREATE TEMP TABLE seen (LIKE idem_outbox_events) ON COMMIT DROP");
      tx.dsl().execute("CREATE FUNCTION pg_temp.keep() RETURNS trigger LANGUAGE plpgsql AS"
          + " $$ BEGIN INSERT INTO seen SELECT NEW.*; RETURN NEW; END $$");
      tx.dsl().execute("CREATE TRIGGER keep AFTER INSERT ON idem_outbox_events FOR EACH ROW EXECUTE FUNCTION pg_temp.keep()");
      ids.add(idem.outbox().enqueue(NewMessage.of("orders", bytes("one")).withAggregateKey("order-1")
          .withHeader("type", "OrderPlaced").withHeader("trace", "t-1")));
      List<NewMessage> many = new ArrayList<>();
      for (int i = 0; i < 40; i++) { // more than one INSERT's worth of rows
        many.add(NewMessage.of("audit", bytes("m-" + i)));
      }
      ids.addAll(idem.outbox().enqueueAll(many));
      assertThat(tx.dsl().fetchCount(tx.dsl().selectFrom("idem_outbox_events"))).as("deleted at once").isZero();
      try (ResultSet rs = tx.connection().createStatement().executeQuery(
          "SELECT id, aggregatetype, aggregateid, type, convert_from(payload, 'UTF8'), headers::text FROM seen")) {
        while (rs.next()) {
          seen.add(new Event(rs.getObject(1, UUID.class), rs.getString(2), rs.getString(3), rs.getString(4), rs.getString(5),
              rs.getString(6)));
        }
      }
      tx.dsl().execute("DROP TRIGGER keep ON idem_outbox_events");
      try (ResultSet rs = tx.connection().createStatement().executeQuery(
          "SELECT n_tup_ins, n_tup_del FROM pg_stat_xact_user_tables WHERE relname = 'idem_outbox_events'")) {
        rs.next();
        return new long[] {rs.getLong(1), rs.getLong(2)};
      }
    });
    assertThat(insertedDeleted).containsExactly(41, 41);
    assertThat(seen).hasSize(41);
    assertThat(seen.get(0)).isEqualTo(new Event(ids.get(0), "orders", "order-1", "OrderPlaced", "one",
        "{\"type\": \"OrderPlaced\", \"trace\": \"t-1\"}"));
    assertThat(seen.get(1)).isEqualTo(new Event(ids.get(1), "audit", null, "", "m-0", "{}"));
    assertThat(seen).extracting(Event::id).containsExactlyElementsOf(ids);
    assertThat(db.count("SELECT count(*) FROM idem_outbox_events")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_outbox")).as("nothing for the polling relay").isZero();
    assertThat(idem.outbox().layout()).isEqualTo(OutboxLayout.DEBEZIUM);
    assertThat(idem.outbox().notifying()).isSameAs(idem.outbox());
  }

  @Test
  void theSameRulesAsThePolledLayout() {
    assertThatThrownBy(() -> idem.outbox().enqueue(NewMessage.of("orders", bytes("x")))).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("no transaction");
    assertThatThrownBy(() -> Idem.builder(ds).outboxLayout(null).build()).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("outboxLayout");
    assertThat(Idem.builder(ds).build().outbox().layout()).isEqualTo(OutboxLayout.POLLED);
    assertThat(db.count(mariadb() ? "SELECT count(*) FROM idem_outbox" : "SELECT count(*) FROM idem_outbox_events")).isZero();
  }

  /**
   * MariaDB's schema has no table for Debezium's Outbox Event Router (its MariaDB connector reads
   * the binlog, and this layout's insert-then-delete write is PostgreSQL's): the layout is refused
   * by name at the first enqueue, in either form, before anything is written, and the caller's
   * transaction goes on.
   */
  @Test
  void onMariaDbTheLayoutIsRefusedAtTheFirstEnqueue() throws Exception {
    Assumptions.assumeTrue(mariadb(), "PostgreSQL has the layout: eachMessageIsInsertedInTheRoutersShapeAndDeletedInTheSameTransaction");
    String refusal = "OutboxLayout.DEBEZIUM is PostgreSQL only";
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThatThrownBy(() -> idem.outbox().enqueue(c, NewMessage.of("orders", bytes("one"))))
          .isInstanceOf(IllegalStateException.class).hasMessageStartingWith(refusal).hasMessageContaining("OutboxLayout.POLLED");
      assertThatThrownBy(() -> idem.outbox().enqueueAll(c, List.of(NewMessage.of("orders", bytes("two")))))
          .isInstanceOf(IllegalStateException.class).hasMessageStartingWith(refusal);
      assertThatThrownBy(() -> idem.outbox().enqueueAll(c, List.of())).isInstanceOf(IllegalStateException.class)
          .hasMessageStartingWith(refusal);
      try (var ps = c.prepareStatement("INSERT INTO orders VALUES (7)")) {
        ps.executeUpdate(); // the caller's own work, in the same transaction
      }
      c.commit();
      c.setAutoCommit(true);
    }
    assertThatThrownBy(() -> idem.inTransaction(tx -> idem.outbox().enqueue(NewMessage.of("orders", bytes("three")))))
        .isInstanceOf(IllegalStateException.class).hasMessageStartingWith(refusal);
    assertThat(idem.outbox().layout()).isEqualTo(OutboxLayout.DEBEZIUM);
    assertThat(db.count("SELECT count(*) FROM orders WHERE id = 7")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_outbox")).as("nothing for the polling relay either").isZero();
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
