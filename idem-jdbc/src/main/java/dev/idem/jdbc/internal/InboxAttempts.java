package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import org.jooq.impl.DSL;

/**
 * A queue consumer's attempts at its records, kept in {@code idem_inbox_attempts} next to an
 * {@code Inbox} (migration V2), so they survive a restart and a rebalance: {@code KafkaInbox}
 * counts an attempt (committed) before the record's effect runs, and reads whether a record given
 * up on had its effect committed after all (its id in the inbox). Each call is its own short
 * auto-commit work on a connection of the inbox's {@code DataSource}; times are the database
 * clock. Not an API: exported to idem-kafka only.
 */
public final class InboxAttempts {
  /** A record's place in its queue and its message id. */
  public record Place(String topic, int partition, long offset, String messageId) {}

  /**
   * Where a record stands after {@link #count}: the polls that delivered it unsettled (this one
   * included), the runs of its effect that are its own, and its state.
   */
  public record Count(int deliveries, int attempts, State state) {}

  /** A row's state. */
  public enum State {
    /** Attempted, not settled. */
    ATTEMPTED('A'),
    /** Kept as a dead letter. */
    DEAD_LETTER('D'),
    /** Given up on, but its effect had committed: acknowledged as a duplicate instead. */
    EFFECT_COMMITTED('E');

    final String code;

    State(char code) {
      this.code = String.valueOf(code);
    }

    static State of(String code) {
      for (State s : values()) {
        if (s.code.equals(code)) {
          return s;
        }
      }
      throw new IllegalStateException("idem_inbox_attempts holds an unknown state '" + code + "'");
    }
  }

  /** An inbox's context and consumer name, which only its own package can read. */
  public record Source(Context context, String consumer) {}

  // Typed Object, not Inbox: this package must not depend on the inbox's (no package cycle).
  private static volatile Function<Object, Source> sources;

  /** Called once, from {@code Inbox}'s static initializer (the JDK's "SharedSecrets" pattern, as {@link Factories}). */
  public static synchronized void register(Function<Object, Source> reader) {
    if (sources != null) {
      throw new IllegalStateException("Inbox has a source reader already: a second registration is refused");
    }
    sources = reader;
  }

  private final Context context;
  private final String consumer;
  private final String group;
  /** Rendered at the first use, when the database is first asked which it is (building touches none). */
  private volatile String table;
  private volatile String inbox;
  private volatile String now;

  private InboxAttempts(Source source, String group) {
    this.context = source.context();
    this.consumer = source.consumer();
    this.group = group;
  }

  private void render() {
    if (table == null) {
      inbox = context.dsl().render(DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_inbox")));
      now = context.mariadb() ? "utc_timestamp(6)" : "clock_timestamp()";
      table = context.dsl().render(DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_inbox_attempts")));
    }
  }

  /** The attempts of consumer group {@code group} reading through {@code inbox} (an {@code Inbox}). */
  public static InboxAttempts of(Object inbox, String group) {
    Function<Object, Source> reader = sources;
    if (reader == null) {
      throw new IllegalStateException("Inbox registered no source reader"); // it does in its static initializer, run by now
    }
    return new InboxAttempts(reader.apply(inbox), group);
  }

  /**
   * Counts a delivery of each of {@code records}, and if {@code alone} (one record, run by itself)
   * an attempt, and commits the counts before any effect runs; a record kept as a dead letter or
   * acknowledged ({@link State#DEAD_LETTER}, {@link State#EFFECT_COMMITTED}) is not counted again.
   * First deletes the group's unsettled rows of the records' partitions below the first offset
   * polled in each: the consumer is past them.
   *
   * @return each record's count, by place
   */
  public Map<Place, Count> count(List<Place> records, boolean alone) {
    if (records.isEmpty()) {
      return Map.of();
    }
    render();
    Map<String, Place> lowest = new LinkedHashMap<>();
    Map<String, Place> highest = new HashMap<>();
    for (Place p : records) {
      String tp = p.topic() + "\u0000" + p.partition();
      lowest.merge(tp, p, (a, b) -> a.offset() <= b.offset() ? a : b);
      highest.merge(tp, p, (a, b) -> a.offset() >= b.offset() ? a : b);
    }
    return context.autoCommitOnce("counting attempts of consumer group " + group, c -> {
      String ranges = String.join(" OR ", Collections.nCopies(lowest.size(), "(topic = ? AND record_partition = ? AND record_offset < ?)"));
      String delete = "DELETE FROM " + table + " WHERE consumer_group = ? AND state = 'A' AND (" + ranges + ")";
      if (context.mariadb()) { // on PostgreSQL part of the counting statement
        try (PreparedStatement ps = c.prepareStatement(delete)) {
          bindRanges(ps, lowest);
          ps.executeUpdate();
        }
      }
      String values = String.join(", ", Collections.nCopies(records.size(), "(?, ?, ?, ?, ?, 1, " + (alone ? 1 : 0) + ", 'A', " + now + ")"));
      String insert = "INSERT INTO " + table + (context.mariadb() ? "" : " AS a") + " (consumer_group, topic, record_partition, record_offset, message_id, deliveries, attempts, state,"
          + " last_attempt_at) VALUES " + values;
      // The same record again counts once more, unless settled; another id at its place (a topic
      // made again) starts from one. MariaDB assigns left to right, each seeing the ones before it:
      // message_id goes last, so the others compare the old one.
      String upsert = context.mariadb()
          ? insert + " ON DUPLICATE KEY UPDATE"
              + " deliveries = IF(message_id = VALUES(message_id), IF(state = 'A', deliveries + 1, deliveries), 1),"
              + " attempts = IF(message_id = VALUES(message_id), IF(state = 'A', attempts + VALUES(attempts), attempts), VALUES(attempts)),"
              + " last_attempt_at = IF(message_id = VALUES(message_id) AND state <> 'A', last_attempt_at, VALUES(last_attempt_at)),"
              + " state = IF(message_id = VALUES(message_id), state, 'A'),"
              + " message_id = VALUES(message_id)"
          : insert + " ON CONFLICT (consumer_group, topic, record_partition, record_offset) DO UPDATE SET"
              + " deliveries = CASE WHEN a.message_id <> excluded.message_id THEN 1 WHEN a.state = 'A' THEN a.deliveries + 1 ELSE a.deliveries END,"
              + " attempts = CASE WHEN a.message_id <> excluded.message_id THEN excluded.attempts WHEN a.state = 'A' THEN a.attempts + excluded.attempts ELSE a.attempts END,"
              + " last_attempt_at = CASE WHEN a.message_id = excluded.message_id AND a.state <> 'A' THEN a.last_attempt_at ELSE excluded.last_attempt_at END,"
              + " state = CASE WHEN a.message_id = excluded.message_id THEN a.state ELSE 'A' END,"
              + " message_id = excluded.message_id"
              + " RETURNING topic, record_partition, record_offset, deliveries, attempts, state";
      if (!context.mariadb()) {
        // The delete in the same statement: one round trip and one commit a poll, not two. Its
        // rows, below each partition's first offset polled, are none of those the insert writes.
        upsert = "WITH gone AS (" + delete + "), counted AS (" + upsert + ") SELECT * FROM counted";
      }
      Map<String, Place> byKey = new HashMap<>();
      for (Place p : records) {
        byKey.put(key(p.topic(), p.partition(), p.offset()), p);
      }
      Map<Place, Count> counts = new HashMap<>();
      try (PreparedStatement ps = c.prepareStatement(upsert)) {
        int i = context.mariadb() ? 1 : bindRanges(ps, lowest);
        for (Place p : records) {
          ps.setString(i++, group);
          ps.setString(i++, p.topic());
          ps.setInt(i++, p.partition());
          ps.setLong(i++, p.offset());
          ps.setString(i++, p.messageId());
        }
        if (context.mariadb()) {
          ps.executeUpdate();
        } else {
          try (ResultSet rs = ps.executeQuery()) {
            read(rs, byKey, counts);
          }
        }
      }
      if (context.mariadb()) {
        String between = String.join(" OR ", Collections.nCopies(lowest.size(),
            "(topic = ? AND record_partition = ? AND record_offset BETWEEN ? AND ?)"));
        try (PreparedStatement ps = c.prepareStatement("SELECT topic, record_partition, record_offset, deliveries, attempts, state FROM " + table
            + " WHERE consumer_group = ? AND (" + between + ")")) {
          int i = 1;
          ps.setString(i++, group);
          for (Map.Entry<String, Place> e : lowest.entrySet()) {
            ps.setString(i++, e.getValue().topic());
            ps.setInt(i++, e.getValue().partition());
            ps.setLong(i++, e.getValue().offset());
            ps.setLong(i++, highest.get(e.getKey()).offset());
          }
          try (ResultSet rs = ps.executeQuery()) {
            read(rs, byKey, counts);
          }
        }
      }
      return counts;
    });
  }

  /** Binds the group and each partition's first offset polled, from the first parameter; returns the next one's index. */
  private int bindRanges(PreparedStatement ps, Map<String, Place> lowest) throws SQLException {
    int i = 1;
    ps.setString(i++, group);
    for (Place p : lowest.values()) {
      ps.setString(i++, p.topic());
      ps.setInt(i++, p.partition());
      ps.setLong(i++, p.offset());
    }
    return i;
  }

  private static void read(ResultSet rs, Map<String, Place> byKey, Map<Place, Count> counts) throws SQLException {
    while (rs.next()) {
      Place p = byKey.get(key(rs.getString(1), rs.getInt(2), rs.getLong(3)));
      if (p != null) {
        counts.put(p, new Count(rs.getInt(4), rs.getInt(5), State.of(rs.getString(6))));
      }
    }
  }

  private static String key(String topic, int partition, long offset) {
    return topic + "\u0000" + partition + "@" + offset;
  }

  /** Settles {@code records} in {@code state}: kept as dead letters, or acknowledged because their effects had committed. */
  public void settle(Collection<Place> records, State state) {
    update("UPDATE " + "%s SET state = '" + state.code + "'", records);
  }

  /**
   * Adds {@code delta} to the attempts of {@code records}: one for a failure in a batch (its own
   * error), minus one for an attempt counted that did not run after all (its id held by a copy in
   * flight, or its batch failed as a whole).
   */
  public void adjust(Collection<Place> records, int delta) {
    update("UPDATE %s SET attempts = attempts + " + delta, records);
  }

  /**
   * Takes back a delivery of each of {@code records} (still unsettled): polled, but not run, or run
   * with an outcome that is no failure (applied, a duplicate, in flight elsewhere) and delivered
   * again only because the consumer seeks back. Only a delivery without an outcome (a death) or a
   * failure stays counted, so "delivered before" keeps meaning "suspect".
   */
  public void takeBack(Collection<Place> records) {
    update("UPDATE %s SET deliveries = GREATEST(deliveries - 1, 0)", records);
  }

  private void update(String set, Collection<Place> records) {
    if (records.isEmpty()) {
      return;
    }
    render();
    context.autoCommitOnce("updating attempts of consumer group " + group, c -> {
      update(c, String.format(set, table), records);
      return null;
    });
  }

  private void update(Connection c, String set, Collection<Place> records) throws SQLException {
    if (records.isEmpty()) {
      return;
    }
    try (PreparedStatement ps = c.prepareStatement(set
        + " WHERE consumer_group = ? AND topic = ? AND record_partition = ? AND record_offset = ? AND message_id = ?")) {
      for (Place p : records) {
        ps.setString(1, group);
        ps.setString(2, p.topic());
        ps.setInt(3, p.partition());
        ps.setLong(4, p.offset());
        ps.setString(5, p.messageId());
        ps.addBatch();
      }
      ps.executeBatch();
    }
  }

  /** Which of {@code messageIds} the inbox holds within their window: their effects committed. */
  public Set<String> committed(Collection<String> messageIds) {
    if (messageIds.isEmpty()) {
      return Set.of();
    }
    render();
    List<String> ids = new ArrayList<>(new HashSet<>(messageIds));
    String in = String.join(", ", Collections.nCopies(ids.size(), "?"));
    String statementTime = context.mariadb() ? "utc_timestamp(6)" : "statement_timestamp()";
    return context.autoCommitOnce("reading inbox " + consumer, c -> {
      Set<String> found = new HashSet<>();
      try (PreparedStatement ps = c.prepareStatement("SELECT message_id FROM " + inbox + " WHERE consumer = ? AND message_id IN ("
          + in + ") AND expires_at > " + statementTime)) {
        ps.setString(1, consumer);
        for (int i = 0; i < ids.size(); i++) {
          ps.setString(i + 2, ids.get(i));
        }
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            found.add(rs.getString(1));
          }
        }
      }
      return found;
    });
  }
}
