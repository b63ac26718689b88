package dev.idem.jdbc.reconcile;

import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.Lineage;
import dev.idem.jdbc.internal.OutboxTable;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * The detector of "two ids for one intent" (a duplicate born upstream): an intent that reached one
 * consumer, or was enqueued for one topic, as more than one message id, such as a republish that
 * minted a new id instead of carrying the first. Every message carries the key of the intent that
 * produced it (the {@value dev.idem.jdbc.outbox.NewMessage#INTENT_HEADER} header, set by the
 * outbox inside an executor's or inbox's effect, or by {@code NewMessage.withIntent}), and an
 * inbox records it when given ({@code Inbox.receive(id, intent, effect)}, idem-kafka's {@code
 * KafkaInbox}): this reads those rows. Built by {@code Idem.lineage()}.
 *
 * <p>{@link #check} reads, in the transaction open on this thread or one of its own: per consumer,
 * the intents received with two or more ids in {@code idem_inbox}, and per topic, the intents
 * enqueued as two or more messages in {@code idem_outbox} (the polled layout's; the Debezium
 * layout keeps no rows), each reported when its latest id arrived within the look-back, by the
 * database clock; so runs every {@code lookBack} report each duplicate once, and again when a
 * further id arrives. {@link #record} writes them into {@code idem_breaks} as {@value #KIND}.
 *
 * <p>The same on PostgreSQL and MariaDB; intents are compared exactly (case and every character
 * count) on both.
 *
 * <p>Not guaranteed: finding a duplicate whose ids were not both recorded: a message that carried
 * no intent (a producer without lineage, an inbox not given it), an id past its window (expired
 * from the inbox) or a sent message past the relay's retention. An intent that legitimately sends
 * several messages to one consumer or topic is reported too: give each its own key ({@code
 * NewMessage.withIntent(Keys.child(key, "step"))}). The reads scan the inbox and the outbox (no
 * index serves them): run them every few minutes, not in a loop.
 *
 * <p>Thread-safe; holds only its context and rendered statements.
 */
public final class IntentLineage {
  /** The {@code kind} of the rows {@link #record} writes into {@code idem_breaks}. */
  public static final String KIND = "TWO_IDS_FOR_ONE_INTENT";

  /** The most intents one {@link #check} reports per hop (inbox, outbox), the latest first. */
  public static final int MAX_FOUND = 1000;

  private final Context context;
  private final boolean maria;
  /** Per hop, with the look-back's microseconds as its one parameter. */
  private final String inboxSql;
  private final String outboxSql;
  private final String insertBreak;

  private IntentLineage(Context context) {
    this.context = context;
    this.maria = context.mariadb();
    DSLContext d = context.dsl();
    String inbox = d.render(DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_inbox")));
    String outbox = d.render(OutboxTable.T);
    // the latest id of a reported intent arrived at or after this, by the database clock
    String since = d.render(DbTime.plusMicros(DbTime.clock(), DSL.field("-?", Long.class)));
    String header = "'" + Lineage.HEADER + "'";
    this.inboxSql = "select i.consumer, i.intent, i.message_id, i.received_at from " + inbox + " i join ("
        + "select consumer, intent from " + inbox + " where intent is not null group by consumer, intent"
        + " having count(*) > 1 and max(received_at) >= " + since + " order by max(received_at) desc limit " + MAX_FOUND
        + ") d on d.consumer = i.consumer and d.intent = i.intent"
        + " order by i.consumer, i.intent, i.received_at, i.message_id";
    // The intent is a header of the message: PostgreSQL keeps the headers as two text arrays,
    // MariaDB as two JSON arrays (its extracted text compared exactly, as its columns are).
    String intent = maria
        ? "cast(json_unquote(json_extract(header_values, json_unquote(json_search(header_names, 'one', " + header
            + ")))) as char character set utf8mb4) collate utf8mb4_nopad_bin"
        : "header_values[array_position(header_names, " + header + ")]";
    String carries = maria ? "json_search(header_names, 'one', " + header + ") is not null" : header + " = any(header_names)";
    this.outboxSql = "with o as (select topic, " + intent + " as intent, " + (maria ? "id" : "id::text") + " as id, created_at, seq"
        + " from " + outbox + " where " + carries + ")"
        + " select o.topic, o.intent, o.id, o.created_at from o join ("
        + "select topic, intent from o group by topic, intent"
        + " having count(*) > 1 and max(created_at) >= " + since + " order by max(created_at) desc limit " + MAX_FOUND
        + ") d on d.topic = o.topic and d.intent = o.intent order by o.topic, o.intent, o.created_at, o.seq";
    Table<?> breaks = DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_breaks"));
    this.insertBreak = d.render(d.insertInto(breaks, DSL.field(DSL.name("found_at")), DSL.field(DSL.name("kind")),
            DSL.field(DSL.name("effect_table")), DSL.field(DSL.name("key")), DSL.field(DSL.name("detail")))
        .values(DbTime.clock(), DSL.inline(KIND), DSL.val((String) null), DSL.val((String) null), DSL.val((String) null)));
  }

  static {
    Factories.register(IntentLineage.class, Void.class, IntentLineage.class, (context, none) -> new IntentLineage(context));
  }

  /**
   * The intents received (per consumer) or enqueued (per topic) as two or more message ids, whose
   * latest id arrived within {@code lookBack} of now, by the database clock; writes nothing.
   *
   * @return the inbox's first (by consumer, then intent), then the outbox's (by topic, then intent);
   *     at most {@value #MAX_FOUND} intents of each
   * @throws IllegalArgumentException if {@code lookBack} is null, not positive or longer than 100 years
   * @throws DataAccessException if a query failed
   */
  public List<TwoIdsForOneIntent> check(Duration lookBack) {
    long micros = DbTime.micros(DbTime.bounded(Require.positive(lookBack, "lookBack"), "lookBack"));
    return context.inTransaction(tx -> {
      Connection c = tx.connection();
      try {
        List<TwoIdsForOneIntent> found = new ArrayList<>();
        read(c, inboxSql, micros, TwoIdsForOneIntent.Hop.INBOX, found);
        read(c, outboxSql, micros, TwoIdsForOneIntent.Hop.OUTBOX, found);
        return found;
      } catch (SQLException e) {
        throw new DataAccessException("could not look for two ids of one intent: " + e.getMessage(), e);
      }
    });
  }

  /** Rows (at, intent, id, time) ordered by at and intent, folded into one finding per (at, intent). */
  private void read(Connection c, String sql, long micros, TwoIdsForOneIntent.Hop hop, List<TwoIdsForOneIntent> found)
      throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setLong(1, micros);
      try (ResultSet rs = ps.executeQuery()) {
        String at = null;
        String intent = null;
        List<String> ids = new ArrayList<>();
        OffsetDateTime first = null;
        OffsetDateTime last = null;
        while (rs.next()) {
          String rowAt = rs.getString(1);
          String rowIntent = rs.getString(2);
          OffsetDateTime time = DbTime.read(rs, 4, maria);
          if (!rowAt.equals(at) || !rowIntent.equals(intent)) {
            if (at != null) {
              found.add(new TwoIdsForOneIntent(hop, at, intent, ids, first, last));
            }
            at = rowAt;
            intent = rowIntent;
            ids = new ArrayList<>();
            first = time;
          }
          ids.add(rs.getString(3));
          last = time;
        }
        if (at != null) {
          found.add(new TwoIdsForOneIntent(hop, at, intent, ids, first, last));
        }
      }
    }
  }

  /**
   * Inserts one row per finding into {@code idem_breaks} (kind {@value #KIND}, key the intent,
   * {@code effect_table} naming the hop: {@code "idem_inbox consumer <consumer>"} or {@code
   * "idem_outbox topic <topic>"}, detail the ids and their times), stamped with the database clock,
   * in one transaction (joins the one open on this thread).
   *
   * @return the rows inserted
   * @throws IllegalArgumentException if {@code found} is null or holds a null
   */
  public int record(List<TwoIdsForOneIntent> found) {
    Require.notNull(found, "found");
    List<TwoIdsForOneIntent> each = new ArrayList<>(found); // one snapshot, checked and written
    for (int i = 0; i < each.size(); i++) {
      if (each.get(i) == null) {
        throw new IllegalArgumentException("found[" + i + "] must not be null (nothing was recorded)");
      }
    }
    return context.inTransaction(tx -> {
      try (PreparedStatement ps = tx.connection().prepareStatement(insertBreak)) {
        int rows = 0;
        for (TwoIdsForOneIntent f : each) {
          ps.setString(1, (f.hop() == TwoIdsForOneIntent.Hop.INBOX ? "idem_inbox consumer " : "idem_outbox topic ") + f.at());
          ps.setString(2, f.intent());
          ps.setString(3, f.messageIds().size() + " message ids for one intent: " + String.join(", ", f.messageIds())
              + " (first " + f.first() + ", last " + f.last() + ")");
          rows += ps.executeUpdate();
        }
        return rows;
      } catch (SQLException e) {
        throw new DataAccessException("could not record two ids of one intent: " + e.getMessage(), e);
      }
    });
  }
}
