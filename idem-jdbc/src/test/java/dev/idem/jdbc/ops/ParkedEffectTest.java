package dev.idem.jdbc.ops;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.sql.PreparedStatement;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A dead letter whose effect already committed: the publish reached the broker and a consumer's
 * inbox applied it, but the broker's acknowledgement was lost, so the relay parked it. The relay
 * says so as it parks, and the operator's list flags it and counts it apart; read from the
 * database (inbox rows and effect rows per message).
 */
@IdemTest(poolSize = 4, sql = "CREATE TABLE shipments (message_id varchar(64) NOT NULL, consumer varchar(64) NOT NULL)")
class ParkedEffectTest {
  static {
    // Operations' logger is made on its first use, maybe here: at the level OperationsTest reads
    System.setProperty("org.slf4j.simpleLogger.log.dev.idem.operations", "info");
  }

  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool) {
    db = database;
    ds = pool;
    idem = Idem.builder(ds).build();
  }

  /** The consumer's effect: one row per message it applied, written in its inbox's transaction. */
  static void apply(Inbox inbox, String consumer, String messageId) {
    try {
      applyOrThrow(inbox, consumer, messageId);
    } catch (java.sql.SQLException e) {
      throw new AssertionError(e);
    }
  }

  static void applyOrThrow(Inbox inbox, String consumer, String messageId) throws java.sql.SQLException {
    inbox.receive(messageId, tx -> {
      try (PreparedStatement ps = tx.connection().prepareStatement("INSERT INTO shipments (message_id, consumer) VALUES (?, ?)")) {
        ps.setString(1, messageId);
        ps.setString(2, consumer);
        ps.executeUpdate();
      }
    });
  }

  @Test
  void aParkedMessageAnInboxAppliedIsFlaggedAndCountedApart() {
    Inbox billing = idem.inbox("billing").build();
    Inbox shipping = idem.inbox("shipping").build();
    // other consumers' rows around them: the look-up walks every consumer of the inbox
    apply(idem.inbox("audit").build(), "audit", "not-an-outbox-id");
    apply(idem.inbox("zeta").build(), "zeta", UUID.randomUUID().toString());

    List<UUID> ids = idem.inTransaction(tx -> idem.outbox().enqueueAll(tx.connection(), List.of(
        NewMessage.of("orders", "a".getBytes(StandardCharsets.UTF_8)), NewMessage.of("orders", "b".getBytes(StandardCharsets.UTF_8)),
        NewMessage.of("orders", "c".getBytes(StandardCharsets.UTF_8)))));
    UUID billed = ids.get(0);
    UUID shipped = ids.get(1);
    UUID lost = ids.get(2);
    // The broker takes a and b (their consumers apply them at once) but every acknowledgement is
    // lost; c never reaches it.
    Map<UUID, Inbox> consumers = Map.of(billed, billing, shipped, shipping);
    PrintStream err = System.err;
    ByteArrayOutputStream log = new ByteArrayOutputStream();
    System.setErr(new PrintStream(log, true, StandardCharsets.UTF_8));
    try (Relay relay = idem.relay(m -> {
      Inbox consumer = consumers.get(m.id());
      if (consumer != null) {
        apply(consumer, consumer == billing ? "billing" : "shipping", m.id().toString());
        throw new IllegalStateException("the broker's acknowledgement was lost");
      }
      throw new IllegalStateException("broker down");
    }).maxAttempts(1).build()) {
      relay.runOnce();
    } finally {
      System.setErr(err);
    }

    // the database: three parked, two of them applied once each by their consumer, one not at all
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'X'")).isEqualTo(3);
    for (UUID id : List.of(billed, shipped)) {
      assertThat(db.count("SELECT count(*) FROM shipments WHERE message_id = ?", id.toString())).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE message_id = ?", id.toString())).isEqualTo(1);
    }
    assertThat(db.count("SELECT count(*) FROM shipments WHERE message_id = ?", lost.toString())).isZero();

    Operations ops = idem.operations();
    Map<UUID, Boolean> flagged = ops.parked(10).stream().collect(Collectors.toMap(ParkedMessage::id, ParkedMessage::effectCommitted));
    assertThat(flagged).isEqualTo(Map.of(billed, true, shipped, true, lost, false));
    OutboxStats stats = ops.outboxStats();
    assertThat(stats.parked()).isEqualTo(3);
    assertThat(stats.parkedEffectCommitted()).isEqualTo(2)
        .isEqualTo(db.count("SELECT count(*) FROM idem_outbox o WHERE o.status = 'X' AND EXISTS (SELECT 1 FROM idem_inbox i WHERE"
            + " i.message_id = " + (db.vendor() == TestDatabase.Vendor.MARIADB ? "o.id" : "o.id::text") + ")"));

    // the relay said it as it parked them
    String said = log.toString(StandardCharsets.UTF_8);
    assertThat(said).contains("outbox message " + billed + " (topic orders) failed, attempt 1 of 1; parked, but inbox consumer"
        + " billing already received it: its effect committed");
    assertThat(said).contains("outbox message " + shipped + " (topic orders) failed, attempt 1 of 1; parked, but inbox consumer"
        + " shipping already received it");
    assertThat(said).contains("outbox message " + lost + " (topic orders) failed, attempt 1 of 1; parked until redriven");

    // a redrive of an applied one is a repeat its inbox acknowledges: still one effect
    assertThat(ops.redrive(billed)).isEqualTo(1);
    try (Relay relay = idem.relay(m -> apply(billing, "billing", m.id().toString())).build()) {
      relay.runOnce();
    }
    assertThat(db.count("SELECT count(*) FROM shipments WHERE message_id = ?", billed.toString())).isEqualTo(1);
    assertThat(ops.outboxStats().parkedEffectCommitted()).isEqualTo(1);
  }
}
