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
 * A queue consumer's polls and attempts at its records, kept next to an {@code Inbox} so they
 * survive a restart and a rebalance: per partition, the range of offsets delivered last and not yet
 * settled ({@code idem_inbox_polls}, migration V5), written before a poll's effects run; and, for
 * the records of a suspect partition (its range delivered again) and the records that failed, a
 * row per record ({@code idem_inbox_attempts}, migration V2): {@code KafkaInbox} counts an attempt
 * (committed) before the effect of a record run alone, and reads whether a record given up on had its
 * effect committed after all (its id in the inbox). Each call is its own short auto-commit work on
 * a connection of the inbox's {@code DataSource}; times are the database clock. Not an API:
 * exported to idem-kafka only.
 */
public final class InboxAttempts {
  /** A record's place in its queue and its message id. */
  public record Place(String topic, int partition, long offset, String messageId) {}

  /**
   * A partition's records in a poll, offsets {@code first} to {@code last} included; after the poll
   * ({@link #narrow}) the range still unsettled, or none when {@code first > last}.
   */
  public record Range(String topic, int partition, long first, long last) {}

  /**
   * Where a partition stands after {@link #poll}: the range unsettled ({@code first} to {@code
   * last}), the polls that delivered it (above one: delivered before without an outcome, suspect),
   * and the highest offset of its records settled in {@code idem_inbox_attempts} (-1 for none).
   */
  public record Polled(long first, long last, int deliveries, long givenUpOffset) {
    /** Whether an earlier delivery of this range had no outcome (a death) or failed. */
    public boolean suspect() {
      return deliveries > 1;
    }
  }

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
  private volatile String polls;
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
      polls = context.dsl().render(DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_inbox_polls")));
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
   * Records a poll, one row per partition, committed before any effect runs. A partition's range
   * that overlaps its unsettled one (delivered before, without an outcome or with a failure) leaves
   * that range as it is and counts one more delivery of it: the partition is suspect. Any other
   * replaces it, delivered once: the range before was settled, or the consumer is past it (its batch
   * committed) or before it (offsets moved back), and nothing of it failed unsettled.
   *
   * @return each partition's standing, by the range given for it
   */
  public Map<Range, Polled> poll(List<Range> ranges) {
    if (ranges.isEmpty()) {
      return Map.of();
    }
    render();
    boolean maria = context.mariadb();
    String values = String.join(", ", Collections.nCopies(ranges.size(), "(?, ?, ?, ?, ?, 1, -1)"));
    String insert = "INSERT INTO " + polls + (maria ? "" : " AS r") + " (consumer_group, topic, record_partition, first_offset,"
        + " last_offset, deliveries, given_up_offset) VALUES " + values;
    // MariaDB assigns left to right, each seeing the ones before it: deliveries first, from the old
    // range, and the range kept where it overlapped (deliveries above one from then on).
    String sql = maria
        ? insert + " ON DUPLICATE KEY UPDATE"
            + " deliveries = IF(deliveries > 0 AND VALUES(first_offset) <= last_offset AND VALUES(last_offset) >= first_offset,"
            + " deliveries + 1, 1),"
            + " first_offset = IF(deliveries > 1, first_offset, VALUES(first_offset)),"
            + " last_offset = IF(deliveries > 1, last_offset, VALUES(last_offset))"
        : insert + " ON CONFLICT (consumer_group, topic, record_partition) DO UPDATE SET"
            + " deliveries = CASE WHEN " + OVERLAP + " THEN r.deliveries + 1 ELSE 1 END,"
            + " first_offset = CASE WHEN " + OVERLAP + " THEN r.first_offset ELSE excluded.first_offset END,"
            + " last_offset = CASE WHEN " + OVERLAP + " THEN r.last_offset ELSE excluded.last_offset END";
    String returning = sql + " RETURNING topic, record_partition, first_offset, last_offset, deliveries, given_up_offset";
    Map<String, Range> byPartition = new HashMap<>();
    for (Range r : ranges) {
      byPartition.put(partitionKey(r.topic(), r.partition()), r);
    }
    return context.autoCommitOnce("recording a poll of consumer group " + group, c -> {
      Map<Range, Polled> polled = new HashMap<>();
      try (PreparedStatement ps = c.prepareStatement(returning)) {
        int i = 1;
        for (Range r : ranges) {
          ps.setString(i++, group);
          ps.setString(i++, r.topic());
          ps.setInt(i++, r.partition());
          ps.setLong(i++, r.first());
          ps.setLong(i++, r.last());
        }
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            Range r = byPartition.get(partitionKey(rs.getString(1), rs.getInt(2)));
            if (r != null) {
              polled.put(r, new Polled(rs.getLong(3), rs.getLong(4), rs.getInt(5), rs.getLong(6)));
            }
          }
        }
      }
      return polled;
    });
  }

  /** PostgreSQL: the new range overlaps the row's, which is unsettled. */
  private static final String OVERLAP =
      "(r.deliveries > 0 AND excluded.first_offset <= r.last_offset AND excluded.last_offset >= r.first_offset)";

  /**
   * After a poll's outcomes, for partitions whose records come again (or that were suspect): sets
   * each partition's unsettled range to {@code first} to {@code last}, its deliveries kept, or
   * settles it when {@code first > last}; and deletes the group's unsettled rows of the partition
   * in {@code idem_inbox_attempts} below {@code first}: the consumer is past them.
   */
  public void narrow(Collection<Range> ranges) {
    if (ranges.isEmpty()) {
      return;
    }
    render();
    context.autoCommitOnce("narrowing the unsettled polls of consumer group " + group, c -> {
      try (PreparedStatement ps = c.prepareStatement("UPDATE " + polls + " SET first_offset = ?, last_offset = ?,"
          + " deliveries = CASE WHEN ? = 1 THEN deliveries ELSE 0 END WHERE consumer_group = ? AND topic = ? AND record_partition = ?")) {
        for (Range r : ranges) {
          ps.setLong(1, r.first());
          ps.setLong(2, r.last());
          ps.setInt(3, r.first() <= r.last() ? 1 : 0);
          ps.setString(4, group);
          ps.setString(5, r.topic());
          ps.setInt(6, r.partition());
          ps.addBatch();
        }
        ps.executeBatch();
      }
      try (PreparedStatement ps = c.prepareStatement(deleteBelow(ranges.size()))) {
        bindBelow(ps, ranges);
        ps.executeUpdate();
      }
      return null;
    });
  }

  /**
   * Counts a delivery of each of {@code records}, and if {@code attempted} an attempt (a record run
   * alone, counted before its effect; or records that failed in a batch, after), and commits the
   * counts; a record kept as a dead letter or acknowledged ({@link State#DEAD_LETTER}, {@link
   * State#EFFECT_COMMITTED}) is not counted again. First deletes the group's unsettled rows of the
   * records' partitions below the lowest offset given in each: the consumer is past them.
   *
   * @return each record's count, by place
   */
  public Map<Place, Count> count(List<Place> records, boolean attempted) {
    if (records.isEmpty()) {
      return Map.of();
    }
    render();
    // per partition, the lowest and the highest offset given
    Map<String, Range> spans = new LinkedHashMap<>();
    for (Place p : records) {
      spans.merge(partitionKey(p.topic(), p.partition()), new Range(p.topic(), p.partition(), p.offset(), p.offset()),
          (a, b) -> new Range(a.topic(), a.partition(), Math.min(a.first(), b.first()), Math.max(a.last(), b.last())));
    }
    return context.autoCommitOnce("counting attempts of consumer group " + group, c -> {
      String delete = deleteBelow(spans.size());
      if (context.mariadb()) { // on PostgreSQL part of the counting statement
        try (PreparedStatement ps = c.prepareStatement(delete)) {
          bindBelow(ps, spans.values());
          ps.executeUpdate();
        }
      }
      String values = String.join(", ", Collections.nCopies(records.size(), "(?, ?, ?, ?, ?, 1, " + (attempted ? 1 : 0) + ", 'A', " + now + ")"));
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
        int i = context.mariadb() ? 1 : bindBelow(ps, spans.values());
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
        String between = String.join(" OR ", Collections.nCopies(spans.size(),
            "(topic = ? AND record_partition = ? AND record_offset BETWEEN ? AND ?)"));
        try (PreparedStatement ps = c.prepareStatement("SELECT topic, record_partition, record_offset, deliveries, attempts, state FROM " + table
            + " WHERE consumer_group = ? AND (" + between + ")")) {
          int i = 1;
          ps.setString(i++, group);
          for (Range r : spans.values()) {
            ps.setString(i++, r.topic());
            ps.setInt(i++, r.partition());
            ps.setLong(i++, r.first());
            ps.setLong(i++, r.last());
          }
          try (ResultSet rs = ps.executeQuery()) {
            read(rs, byKey, counts);
          }
        }
      }
      return counts;
    });
  }

  /**
   * Deletes the group's unsettled rows of {@code partitions} partitions below an offset each (the
   * consumer is past them), bound by {@link #bindBelow}.
   */
  private String deleteBelow(int partitions) {
    return "DELETE FROM " + table + " WHERE consumer_group = ? AND state = 'A' AND ("
        + String.join(" OR ", Collections.nCopies(partitions, "(topic = ? AND record_partition = ? AND record_offset < ?)")) + ")";
  }

  /** Binds {@link #deleteBelow}'s group and, per range, its partition and first offset, from the first parameter; returns the next one's index. */
  private int bindBelow(PreparedStatement ps, Collection<Range> ranges) throws SQLException {
    int i = 1;
    ps.setString(i++, group);
    for (Range r : ranges) {
      ps.setString(i++, r.topic());
      ps.setInt(i++, r.partition());
      ps.setLong(i++, r.first());
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
    return partitionKey(topic, partition) + "@" + offset;
  }

  private static String partitionKey(String topic, int partition) {
    return topic + "\u0000" + partition;
  }

  /**
   * Settles {@code records} in {@code state}: kept as dead letters, or acknowledged because their
   * effects had committed; and raises their partitions' {@link Polled#givenUpOffset} to them, so a
   * poll that delivers them again reads their state.
   */
  public void settle(Collection<Place> records, State state) {
    if (records.isEmpty()) {
      return;
    }
    render();
    context.autoCommitOnce("settling attempts of consumer group " + group, c -> {
      update(c, "UPDATE " + table + " SET state = '" + state.code + "'", records);
      try (PreparedStatement ps = c.prepareStatement("UPDATE " + polls + " SET given_up_offset = GREATEST(given_up_offset, ?)"
          + " WHERE consumer_group = ? AND topic = ? AND record_partition = ?")) {
        for (Place p : records) {
          ps.setLong(1, p.offset());
          ps.setString(2, group);
          ps.setString(3, p.topic());
          ps.setInt(4, p.partition());
          ps.addBatch();
        }
        ps.executeBatch();
      }
      return null;
    });
  }

  /**
   * Takes an attempt counted back from each of {@code records}: counted before its effect, it did
   * not run after all (its id held by a copy in flight, or its transaction failed as a whole).
   */
  public void takeBackAttempt(Collection<Place> records) {
    if (records.isEmpty()) {
      return;
    }
    render();
    context.autoCommitOnce("updating attempts of consumer group " + group, c -> {
      update(c, "UPDATE " + table + " SET attempts = attempts - 1", records);
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
