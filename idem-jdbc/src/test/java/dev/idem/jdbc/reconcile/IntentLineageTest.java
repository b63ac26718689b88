package dev.idem.jdbc.reconcile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.inbox.Received;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * Lineage across hops, read from the database: the outbox stamps each message with the intent that
 * produced it, the inbox records the intent a message carried and passes it on to what its effect
 * enqueues, and {@link IntentLineage} reports an intent that arrived as two message ids (a planted
 * republish with a new id), on PostgreSQL and MariaDB.
 */
@IdemTest(poolSize = 4, sql = "CREATE TABLE shipments (message_id varchar(64) PRIMARY KEY)")
class IntentLineageTest {
  final TestDatabase db;
  final DataSource ds;
  final boolean maria;
  final Idem idem;
  final IdempotentExecutor executor;

  IntentLineageTest(TestDatabase db, DataSource ds) {
    this.db = db;
    this.ds = ds;
    this.maria = db.vendor() == TestDatabase.Vendor.MARIADB;
    this.idem = Idem.builder(ds).build();
    this.executor = idem.executor().build();
  }

  static NewMessage message(String topic) {
    return NewMessage.of(topic, "{}".getBytes(StandardCharsets.UTF_8));
  }

  /** The idem-intent header of outbox message {@code id}, read from its row; null without one. */
  String intentOf(UUID id) throws SQLException {
    String sql = maria
        ? "SELECT json_unquote(json_extract(header_values, json_unquote(json_search(header_names, 'one', 'idem-intent'))))"
            + " FROM idem_outbox WHERE id = ?"
        : "SELECT header_values[array_position(header_names, 'idem-intent')] FROM idem_outbox WHERE id = ?::uuid";
    try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, id.toString());
      try (ResultSet rs = ps.executeQuery()) {
        assertThat(rs.next()).as("outbox row %s", id).isTrue();
        return rs.getString(1);
      }
    }
  }

  /** The intent the inbox recorded for {@code (consumer, id)}. */
  String recorded(String consumer, String messageId) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT intent FROM idem_inbox WHERE consumer = ? AND message_id = ?")) {
      ps.setString(1, consumer);
      ps.setString(2, messageId);
      try (ResultSet rs = ps.executeQuery()) {
        assertThat(rs.next()).as("inbox row %s/%s", consumer, messageId).isTrue();
        return rs.getString(1);
      }
    }
  }

  @Test
  void aMessageEnqueuedInAnEffectCarriesItsKey_anExplicitIntentWins_andNoneOutsideAnEffect() throws Exception {
    IdempotencyKey key = IdempotencyKey.of("shop", "order-1");
    UUID[] ids = new UUID[2];
    executor.execute(key, Fingerprint.of("order-1"), Codec.utf8(), tx -> {
      ids[0] = idem.outbox().enqueue(message("orders.placed"));
      ids[1] = idem.outbox().enqueue(message("emails").withIntent(Keys.child(key, "email")));
      return "placed";
    });
    assertThat(intentOf(ids[0])).isEqualTo("shop:order-1");
    assertThat(intentOf(ids[1])).isEqualTo(Keys.child(key, "email").toString());
    UUID outside = idem.inTransaction(tx -> idem.outbox().enqueue(message("orders.placed")));
    assertThat(intentOf(outside)).as("no effect runs: no intent").isNull();

    // an external call's transaction carries the key too
    UUID[] external = new UUID[1];
    executor.executeExternal(IdempotencyKey.of("shop", "charge-1"), Fingerprint.of("c"), Codec.utf8(), attempt -> {
      external[0] = idem.inTransaction(tx -> idem.outbox().enqueue(message("charges")));
      return "charged";
    });
    assertThat(intentOf(external[0])).isEqualTo("shop:charge-1");
  }

  @Test
  void theInboxRecordsTheIntent_andPassesItOnToWhatItsEffectEnqueues() throws Exception {
    Inbox shipping = idem.inbox("shipping-a").build();
    UUID[] next = new UUID[1];
    shipping.receive("m-1", "shop:order-7", tx -> {
      tx.dsl().execute("INSERT INTO shipments VALUES ('a-m-1')");
      next[0] = idem.outbox().enqueue(message("shipped"));
    });
    assertThat(recorded("shipping-a", "m-1")).isEqualTo("shop:order-7");
    assertThat(intentOf(next[0])).as("the next hop's message").isEqualTo("shop:order-7");

    // without an intent: recorded as unknown, and none is made up for the next hop
    shipping.receive("m-2", tx -> next[0] = idem.outbox().enqueue(message("shipped")));
    assertThat(recorded("shipping-a", "m-2")).isNull();
    assertThat(intentOf(next[0])).isNull();

    // in the caller's transaction
    idem.useTransaction(tx -> shipping.receive(tx.connection(), "m-3", "shop:order-8", t -> { }));
    assertThat(recorded("shipping-a", "m-3")).isEqualTo("shop:order-8");

    // a batch: each message's own intent
    record Msg(String id, String intent) {}
    Received<Msg> r = shipping.receiveAll(List.of(new Msg("b-1", "shop:order-9"), new Msg("b-2", null), new Msg("m-1", "shop:order-7")),
        Msg::id, Msg::intent, (tx, m) -> tx.dsl().execute("INSERT INTO shipments VALUES (?)", "a-" + m.id()));
    assertThat(r.applied()).extracting(Msg::id).containsExactly("b-1", "b-2");
    assertThat(r.duplicates()).extracting(Msg::id).containsExactly("m-1");
    assertThat(recorded("shipping-a", "b-1")).isEqualTo("shop:order-9");
    assertThat(recorded("shipping-a", "b-2")).isNull();
    assertThat(db.count("SELECT count(*) FROM shipments WHERE message_id LIKE 'a-%'")).isEqualTo(3);
  }

  @Test
  void aBadIntentIsRefused_andNothingIsWritten() {
    Inbox shipping = idem.inbox("shipping-bad").build();
    assertThatThrownBy(() -> shipping.receive("m-1", "shop order-1", tx -> { }))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("intent has U+0020 at index 4; only visible ASCII ('!' to '~') is allowed, as in an idempotency key");
    assertThatThrownBy(() -> shipping.receive("m-1", "", tx -> { }))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("intent must be 1 to 511 characters");
    assertThatThrownBy(() -> shipping.receiveAll(List.of("m-1"), m -> m, m -> "x".repeat(512), (tx, m) -> { }))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("intent of messages[0] must be 1 to 511 characters");
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'shipping-bad'")).isZero();
    assertThatThrownBy(() -> idem.lineage().check(Duration.ZERO)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lookBack");
    assertThatThrownBy(() -> idem.lineage().check(null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> idem.lineage().record(java.util.Arrays.asList((TwoIdsForOneIntent) null)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("found[0]");
  }

  @Test
  void aRepublishWithANewIdForOneIntent_isReported_inTheInboxAndTheOutbox_andRecorded() throws Exception {
    Inbox billing = idem.inbox("billing-r").build();
    // upstream, the producer's retry minted a new message id for the same intent and enqueued it again
    IdempotencyKey intent = IdempotencyKey.of("shop", "order-42");
    UUID first = idem.inTransaction(tx -> idem.outbox().enqueue(message("orders.r").withIntent(intent)));
    UUID again = idem.inTransaction(tx -> idem.outbox().enqueue(message("orders.r").withIntent(intent)));
    idem.inTransaction(tx -> idem.outbox().enqueue(message("orders.r").withIntent(IdempotencyKey.of("shop", "order-43"))));
    // downstream, both arrive, each applied once by its id: the effect happened twice
    for (UUID id : List.of(first, again)) {
      billing.receive(id.toString(), intent.toString(), tx -> tx.dsl().execute("INSERT INTO shipments VALUES (?)", "r-" + id));
    }
    billing.receive("single", "shop:order-43", tx -> { });
    idem.inbox("audit-r").build().receive(first.toString(), intent.toString(), tx -> { }); // another consumer: once

    List<TwoIdsForOneIntent> found = idem.lineage().check(Duration.ofMinutes(10)).stream()
        .filter(f -> f.at().equals("billing-r") || f.at().equals("orders.r") || f.at().equals("audit-r")).toList();
    assertThat(found).hasSize(2);
    TwoIdsForOneIntent inbox = found.get(0);
    assertThat(inbox.hop()).isEqualTo(TwoIdsForOneIntent.Hop.INBOX);
    assertThat(inbox.at()).isEqualTo("billing-r");
    assertThat(inbox.intent()).isEqualTo("shop:order-42");
    assertThat(inbox.messageIds()).containsExactly(first.toString(), again.toString());
    assertThat(inbox.first()).isBeforeOrEqualTo(inbox.last());
    TwoIdsForOneIntent outbox = found.get(1);
    assertThat(outbox.hop()).isEqualTo(TwoIdsForOneIntent.Hop.OUTBOX);
    assertThat(outbox.at()).isEqualTo("orders.r");
    assertThat(outbox.messageIds()).containsExactly(first.toString(), again.toString());
    assertThat(db.count("SELECT count(*) FROM shipments WHERE message_id LIKE 'r-%'")).as("two effects, one intent").isEqualTo(2);

    assertThat(idem.lineage().record(found)).isEqualTo(2);
    assertThat(db.count("SELECT count(*) FROM idem_breaks WHERE kind = 'TWO_IDS_FOR_ONE_INTENT' AND " + (maria ? "`key`" : "key")
        + " = 'shop:order-42' AND effect_table IN ('idem_inbox consumer billing-r', 'idem_outbox topic orders.r')")).isEqualTo(2);

    // older than the look-back, by the database clock: not reported again
    db.execute("UPDATE idem_inbox SET received_at = received_at - " + (maria ? "INTERVAL 2 HOUR" : "interval '2 hours'")
        + " WHERE consumer = 'billing-r'");
    assertThat(idem.lineage().check(Duration.ofMinutes(10))).noneMatch(f -> f.at().equals("billing-r"));
    assertThat(idem.lineage().check(Duration.ofHours(3))).anyMatch(f -> f.at().equals("billing-r"));
  }

  @Test
  void intentsAreComparedExactly() throws Exception {
    Inbox exact = idem.inbox("exact-r").build();
    exact.receive("x-1", "shop:Order-1", tx -> { });
    exact.receive("x-2", "shop:order-1", tx -> { });
    assertThat(idem.lineage().check(Duration.ofMinutes(10))).noneMatch(f -> f.at().equals("exact-r"));
  }
}
