package dev.idem.jdbc.ops;

import dev.idem.internal.Events;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.InboxReceived;
import dev.idem.jdbc.internal.KeyTable;
import dev.idem.jdbc.internal.OutboxRedrive;
import dev.idem.jdbc.internal.OutboxTable;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.CodecException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The operator's view of idem: what is stuck and the actions that unstick it. Built by {@code
 * Idem.operations()}.
 *
 * <p><b>Unknown outcomes.</b> An external effect whose attempt died (or whose call threw) leaves
 * its key in flight with a lease that ran out: the call may or may not have reached the provider.
 * The next repeat of the intent takes it over and calls again (asking its {@code Resolver} first,
 * if it has one); an intent nobody repeats stays unknown. {@link #stuckKeys} lists them, {@link
 * #unknownOutcomes} counts them for a gauge. The operator asks the provider by the call key, then
 * either {@link #resolve}s the key with the outcome found there (every repeat replays it) or
 * {@link #release}s it (the next repeat calls again, with the same call key, under fence + 1).
 * Both are fenced by the token the operator read: if another attempt took over meanwhile, they are
 * refused and change nothing. Both act on stuck keys only (in flight, lease over): a live holder is
 * never overruled.
 *
 * <p><b>Parked messages.</b> {@link #parked}, {@link #redrive(UUID)}, {@link #redriveTopic}, {@link
 * #redriveAll} and {@link #outboxStats}: the one way to administer the outbox (the {@code Outbox}
 * only writes messages). A parked message that an inbox of this database already received is
 * flagged ({@link ParkedMessage#effectCommitted}) and counted apart ({@link
 * OutboxStats#parkedEffectCommitted}): its publish reached the broker although the relay saw a
 * failure, and its effect committed; it needs no redrive.
 *
 * <p><b>Partitions.</b> {@link #maintainPartitions()}: the partitioned layout's days (docs/scale.md),
 * created ahead and dropped whole once their rows are past their window; nothing to do in the
 * default layout, the only one on MariaDB (the partitioned layout is PostgreSQL only).
 *
 * <p>Every action emits {@link dev.idem.event.IdemEvent.OperatorAction} (source {@code
 * "operations"}) and logs one line at INFO on logger {@code dev.idem.operations}, with the rows it
 * changed (0 included). Every time is the database's clock. Reads and actions join the transaction
 * open on this thread, if any, else run in one of their own. Bad arguments are refused with an
 * {@link IllegalArgumentException} naming them, before any SQL.
 *
 * <p>Not guaranteed: that a resolve records what really happened (idem cannot check the provider)
 * or that the listed rows are still stuck when acted on (the fence check covers that). The reads
 * scan the key table or the outbox (no index serves them): call them every minute, not in a loop.
 *
 * <p>The same on PostgreSQL and MariaDB: every read, action and guarantee above holds on both.
 *
 * <p>Thread-safe; holds only its context and rendered statements.
 */
public final class Operations {
  /** The most rows one listing returns. */
  public static final int MAX_LIMIT = 10_000;

  private static final Logger LOG = LoggerFactory.getLogger("dev.idem.operations");

  /** The database clock when the statement runs: every comparison and age is taken from it. */
  private static final Field<OffsetDateTime> NOW = DbTime.clock();
  /** In flight with the lease over: the attempt died or threw, the outcome is unknown. */
  private static final Condition STUCK =
      KeyTable.STATE.eq(DSL.inline(KeyTable.IN_FLIGHT)).and(KeyTable.LEASE_EXPIRES_AT.le(NOW));

  private final Context context;
  /** On MariaDB: times are read as the UTC DATETIMEs they are, and ages are rendered for it. */
  private final boolean maria;
  private final Events events;
  private final OutboxRedrive redrive;
  private final String stuckSql;
  private final String unknownSql;
  private final String resolveSql;
  private final String releaseSql;
  private final String parkedSql;
  private final String statsSql;
  private final String maintainSql;

  private Operations(Context context) {
    this.context = context;
    this.events = Events.to(context.listener(), "operations");
    this.redrive = new OutboxRedrive(context);
    DSLContext d = context.dsl();
    this.maria = context.mariadb();
    // ISO 8601 durations (Duration.toString), which PostgreSQL reads as intervals; MariaDB has no
    // partitioned layout (context.partitioned() is false there), so nothing to maintain
    this.maintainSql = maria ? null : "select created, dropped from "
        + d.render(DSL.name(context.schema(), "idem_maintain_partitions")) + "(?::interval, ?::interval)";
    Condition thisStuckKey = KeyTable.SCOPE.eq(DSL.val((String) null, KeyTable.SCOPE))
        .and(KeyTable.KEY.eq(DSL.val((String) null, KeyTable.KEY)))
        .and(KeyTable.FENCE.eq(DSL.val((Long) null, KeyTable.FENCE))).and(STUCK);
    this.stuckSql = d.render(d.select(KeyTable.SCOPE, KeyTable.KEY, KeyTable.FENCE, KeyTable.CALL_KEY,
            microsSince(maria, KeyTable.LEASE_EXPIRES_AT), KeyTable.CREATED_AT)
        .from(KeyTable.T).where(STUCK).orderBy(KeyTable.LEASE_EXPIRES_AT).limit(DSL.val((Integer) null, Integer.class)));
    this.unknownSql = d.render(d.select(DSL.count(), DSL.coalesce(DSL.max(microsSince(maria, KeyTable.LEASE_EXPIRES_AT)), DSL.inline(0L)))
        .from(KeyTable.T).where(STUCK));
    // The executor's phase 3 on behalf of the lost attempt: completed with the result, lease cleared.
    this.resolveSql = d.render(d.update(KeyTable.T)
        .set(KeyTable.STATE, DSL.inline(KeyTable.COMPLETED))
        .set(KeyTable.RESULT, DSL.val((byte[]) null, KeyTable.RESULT))
        .set(KeyTable.COMPLETED_AT, NOW)
        .set(KeyTable.LEASE_EXPIRES_AT, DSL.inline((OffsetDateTime) null))
        .where(thisStuckKey));
    // Lease and window over now, row kept: the next repeat re-claims it as past its window, which
    // sets fence + 1 (the token never restarts, as it would if the row were deleted) and keeps
    // the call key, which is derived from the intent's key.
    this.releaseSql = d.render(d.update(KeyTable.T)
        .set(KeyTable.LEASE_EXPIRES_AT, NOW).set(KeyTable.EXPIRES_AT, NOW).where(thisStuckKey));
    Condition parked = OutboxTable.STATUS.eq(DSL.inline(OutboxTable.PARKED));
    // Qualified: the inbox probe beside it reads another table
    Condition received = InboxReceived.of(d, maria, DSL.field(DSL.name("idem_outbox", "id")));
    this.parkedSql = d.render(d.select(OutboxTable.ID, OutboxTable.TOPIC, OutboxTable.AGGREGATE_KEY, OutboxTable.ATTEMPTS,
            OutboxTable.LAST_ERROR, OutboxTable.NEXT_ATTEMPT_AT, // parking sets next_attempt_at to the moment it parked
            DSL.when(received, DSL.inline(1)).otherwise(DSL.inline(0)))
        .from(OutboxTable.T).where(parked).orderBy(OutboxTable.NEXT_ATTEMPT_AT)
        .limit(DSL.val((Integer) null, Integer.class)));
    Condition pending = OutboxTable.STATUS.eq(DSL.inline(OutboxTable.PENDING));
    this.statsSql = d.render(d.select(DSL.count().filterWhere(pending), DSL.count().filterWhere(parked),
            DSL.count().filterWhere(parked.and(received)),
            DSL.coalesce(DSL.max(microsSince(maria, OutboxTable.CREATED_AT)).filterWhere(pending), DSL.inline(0L)))
        .from(OutboxTable.T).where(OutboxTable.STATUS.in(DSL.inline(OutboxTable.PENDING), DSL.inline(OutboxTable.PARKED))));
  }

  static {
    Factories.register(Operations.class, Void.class, Operations.class, (context, none) -> new Operations(context));
  }

  /** Whole microseconds from {@code t} to now, by the database clock. */
  private static Field<Long> microsSince(boolean maria, Field<OffsetDateTime> t) {
    return maria ? DSL.field("timestampdiff(microsecond, {0}, {1})", Long.class, t, NOW)
        : DSL.field("(extract(epoch from (clock_timestamp() - {0})) * 1000000)::bigint", Long.class, t);
  }

  /** The time in column {@code i}, as this database keeps it ({@link DbTime#read}). */
  private OffsetDateTime time(ResultSet rs, int i) throws SQLException {
    return DbTime.read(rs, i, maria);
  }

  // ---------------------------------------------------------------------------------------------
  // Unknown outcomes

  /**
   * The stuck keys, the one whose lease ran out first first, at most {@code limit}.
   *
   * @throws IllegalArgumentException if {@code limit} is not within 1 to {@value #MAX_LIMIT}
   */
  public List<StuckKey> stuckKeys(int limit) {
    checkLimit(limit);
    return read("list the stuck keys", c -> {
      List<StuckKey> out = new ArrayList<>();
      try (PreparedStatement ps = c.prepareStatement(stuckSql)) {
        ps.setInt(1, limit);
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            out.add(new StuckKeyValue(IdempotencyKey.of(rs.getString(1), rs.getString(2)), rs.getLong(3), rs.getString(4),
                Duration.ofNanos(rs.getLong(5) * 1000), time(rs, 6)));
          }
        }
      }
      return out;
    });
  }

  /** How many keys are stuck and how long ago the oldest one's lease ran out; one statement. */
  public UnknownOutcomes unknownOutcomes() {
    return read("count the unknown outcomes", c -> {
      try (PreparedStatement ps = c.prepareStatement(unknownSql); ResultSet rs = ps.executeQuery()) {
        rs.next();
        return new UnknownOutcomesValue(rs.getLong(1), Duration.ofNanos(rs.getLong(2) * 1000));
      }
    });
  }

  /**
   * Records the outcome the operator found at the provider for a stuck key: the key becomes
   * completed with {@code result} as its stored result, so every repeat gets it as the replay
   * (decoded by the repeat's own codec: pass bytes that codec reads, or use {@link
   * #resolve(IdempotencyKey, long, Codec, Object)}).
   *
   * <p>Bytes, not a {@code T}: the operator (an actuator endpoint, a console) usually has no codec
   * of the service's types, and the stored result is bytes anyway.
   *
   * @param fence the token the operator read with the key ({@link StuckKey#fence})
   * @return true if recorded; false if the key is not stuck under {@code fence} (another attempt
   *     took over, it completed, or it is not there): nothing changed
   * @throws IllegalArgumentException if {@code key} or {@code result} is null, or {@code fence} &lt; 1
   */
  public boolean resolve(IdempotencyKey key, long fence, byte[] result) {
    checkKey(key, fence);
    if (result == null) {
      throw new IllegalArgumentException("result must not be null");
    }
    byte[] copy = result.clone();
    return act("resolve", key + " fence " + fence, c -> keyAction(c, resolveSql, 1, copy, key, fence)) == 1;
  }

  /**
   * {@link #resolve(IdempotencyKey, long, byte[])} with the result encoded by {@code codec}: give
   * the codec the executor's calls of this key use.
   *
   * @throws IllegalArgumentException if {@code codec} is null, or as the byte form
   * @throws CodecException if {@code codec} could not encode {@code value}; nothing changed
   */
  public <T> boolean resolve(IdempotencyKey key, long fence, Codec<T> codec, T value) {
    checkKey(key, fence);
    if (codec == null) {
      throw new IllegalArgumentException("codec must not be null");
    }
    byte[] bytes;
    try {
      bytes = codec.encode(value);
    } catch (Exception e) {
      throw new CodecException("could not encode the result of " + key + " with " + codec + ": " + e.getMessage(), e);
    }
    return resolve(key, fence, bytes);
  }

  /**
   * Makes a stuck key claimable again: its lease and its window end now, the row stays. The next
   * call of the key re-claims it with fence + 1 and the same call key, and calls the provider
   * again (asking its resolver first, if it has one): release only when the provider has no record
   * of the call key, or dedupes by it.
   *
   * @return true if released; false if the key is not stuck under {@code fence}: nothing changed
   * @throws IllegalArgumentException if {@code key} is null or {@code fence} &lt; 1
   */
  public boolean release(IdempotencyKey key, long fence) {
    checkKey(key, fence);
    return act("release", key + " fence " + fence, c -> keyAction(c, releaseSql, 0, null, key, fence)) == 1;
  }

  private static int keyAction(Connection c, String sql, int first, byte[] result, IdempotencyKey key, long fence)
      throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      if (result != null) {
        ps.setBytes(1, result);
      }
      ps.setString(first + 1, key.scope());
      ps.setString(first + 2, key.value());
      ps.setLong(first + 3, fence);
      return ps.executeUpdate();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Outbox

  /**
   * The parked messages, the one parked first first, at most {@code limit}.
   *
   * @throws IllegalArgumentException if {@code limit} is not within 1 to {@value #MAX_LIMIT}
   */
  public List<ParkedMessage> parked(int limit) {
    checkLimit(limit);
    return read("list the parked messages", c -> {
      List<ParkedMessage> out = new ArrayList<>();
      try (PreparedStatement ps = c.prepareStatement(parkedSql)) {
        ps.setInt(1, limit);
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            // the id's text: PostgreSQL's uuid and MariaDB's CHAR(36) alike
            out.add(new ParkedMessageValue(UUID.fromString(rs.getString(1)), rs.getString(2), rs.getString(3), rs.getInt(4),
                rs.getString(5), time(rs, 6), rs.getInt(7) == 1));
          }
        }
      }
      return out;
    });
  }

  /**
   * Re-drives one parked message: pending again, due now, attempts reset, id unchanged.
   *
   * @return the rows changed: 1, or 0 if no parked message has {@code id}
   * @throws IllegalArgumentException if {@code id} is null
   */
  public long redrive(UUID id) {
    if (id == null) {
      throw new IllegalArgumentException("id must not be null");
    }
    return act("redrive", "message " + id, c -> redrive.byId(c, id));
  }

  /**
   * Re-drives every parked message of {@code topic} (fix the cause first: they are tried again at once).
   *
   * @return how many were parked and are now pending
   * @throws IllegalArgumentException if {@code topic} is null
   */
  public long redriveTopic(String topic) {
    if (topic == null) {
      throw new IllegalArgumentException("topic must not be null");
    }
    return act("redriveTopic", "topic " + topic, c -> redrive.byTopic(c, topic));
  }

  /** Re-drives every parked message; returns how many. */
  public long redriveAll() {
    return act("redriveAll", "all parked messages", redrive::all);
  }

  /**
   * The backlog of the {@code DEBEZIUM} outbox layout, whose messages no relay of idem's holds: how
   * many bytes of write-ahead log the replication slot {@code slot} (the connector's, {@code
   * DebeziumOutbox.Builder.slot}) has not yet confirmed, {@code pg_wal_lsn_diff(pg_current_wal_insert_lsn(),
   * confirmed_flush_lsn)}, from where the server inserts WAL (its write position trails that by up
   * to the WAL writer's delay when commits do not wait for it); one statement. Near 0 when the connector has relayed everything (a
   * few hundred bytes: it confirms its last event's position, not the end of the log); it grows while the connector is stopped or behind, with everything the server writes (not only
   * the outbox's messages), and so does the WAL PostgreSQL must keep for the slot. The connector
   * confirms a position when it relays a message: while the outbox is quiet, writes to other
   * tables count until the next message is relayed.
   *
   * <p>PostgreSQL only, as the layout is.
   *
   * @return the lag in bytes, at least 0
   * @throws IllegalArgumentException if {@code slot} is null or not a slot name (1 to 63 lower-case
   *     letters, digits, underscores)
   * @throws IllegalStateException on MariaDB; or if this database has no logical slot named {@code
   *     slot}, or it has confirmed nothing yet: messages written while no slot exists are never relayed
   */
  public long replicationSlotLag(String slot) {
    if (slot == null || !slot.matches("[a-z0-9_]{1,63}")) {
      throw new IllegalArgumentException("slot must be 1 to 63 lower-case letters, digits or underscores, was "
          + (slot == null ? "null" : "'" + slot + "'"));
    }
    if (maria) {
      throw new IllegalStateException("replicationSlotLag is PostgreSQL only (the DEBEZIUM outbox layout and its"
          + " replication slot); on MariaDB the outbox is polled: read outboxStats()");
    }
    Long lag = read("read the lag of replication slot " + slot, c -> {
      try (PreparedStatement ps = c.prepareStatement("select greatest(0, pg_wal_lsn_diff(pg_current_wal_insert_lsn(),"
          + " confirmed_flush_lsn))::bigint from pg_replication_slots where slot_name = ? and database = current_database()"
          + " and slot_type = 'logical'")) {
        ps.setString(1, slot);
        try (ResultSet rs = ps.executeQuery()) {
          if (!rs.next()) {
            return null;
          }
          long bytes = rs.getLong(1);
          return rs.wasNull() ? null : bytes;
        }
      }
    });
    if (lag == null) {
      throw new IllegalStateException("this database has no logical replication slot '" + slot + "' that has confirmed"
          + " a position: the Debezium connector has not created it (or it was dropped), and messages written meanwhile"
          + " are never relayed");
    }
    return lag;
  }

  /**
   * Pending and parked messages, the parked ones whose effect already committed, and the age of
   * the oldest pending one; one statement.
   */
  public OutboxStats outboxStats() {
    return read("read the outbox's stats", c -> {
      try (PreparedStatement ps = c.prepareStatement(statsSql); ResultSet rs = ps.executeQuery()) {
        rs.next();
        return new OutboxStatsValue(rs.getLong(1), rs.getLong(2), rs.getLong(3), Duration.ofNanos(rs.getLong(4) * 1000));
      }
    });
  }

  // ---------------------------------------------------------------------------------------------
  // Partitions

  /**
   * {@link #maintainPartitions(Duration, Duration)} with partitions created 7 days ahead and kept
   * at least 1 day after their day ends.
   */
  public PartitionMaintenance maintainPartitions() {
    return maintainPartitions(PARTITIONS_AHEAD, PARTITIONS_KEPT);
  }

  /** How far ahead {@link #maintainPartitions()} creates partitions. */
  public static final Duration PARTITIONS_AHEAD = Duration.ofDays(7);
  /** How long after its day ends {@link #maintainPartitions()} keeps a partition at least. */
  public static final Duration PARTITIONS_KEPT = Duration.ofDays(1);

  /**
   * The partitioned layout's maintenance (docs/scale.md): creates the daily partitions of the key
   * table and the inbox from yesterday to {@code ahead} from now, and drops, whole, each older one
   * whose day ended at least {@code keep} ago and whose rows are all past their window, none of
   * them an external claim in flight (an unknown outcome keeps its partition until it is resolved
   * or released and past its window again). Days are UTC; times are the database clock. In the
   * default layout, the only one on MariaDB, it does nothing. Safe to run from several instances
   * at once; run it at least daily (the Spring Boot starter runs it with its scheduled expiry).
   *
   * <p>A key is filed under the time in its UUIDv7: one whose day has no partition, because it is
   * older than the oldest kept or further ahead than {@code ahead}, is refused, never run again.
   * So {@code keep} is at least the longest delay between minting a key and its first use (an
   * offline queue), and {@code ahead} covers clients whose clocks run fast.
   *
   * <p>Runs in a transaction of its own, with a short lock wait per drop: a partition busy with
   * claims is left for the next run.
   *
   * @throws IllegalArgumentException if {@code ahead} is null or not 1 to 366 days, or {@code
   *     keep} is null or negative
   */
  public PartitionMaintenance maintainPartitions(Duration ahead, Duration keep) {
    if (ahead == null || ahead.compareTo(Duration.ofDays(1)) < 0 || ahead.compareTo(Duration.ofDays(366)) > 0) {
      throw new IllegalArgumentException("ahead must be within 1 and 366 days, was " + ahead);
    }
    if (keep == null || keep.isNegative()) {
      throw new IllegalArgumentException("keep must not be null or negative, was " + keep);
    }
    // the default layout has nothing to create or drop (its SQL function is a stub for own-Flyway users)
    PartitionMaintenance done = !context.partitioned() ? new PartitionMaintenanceValue(0, 0) : context.autoCommitOnce("idem partition maintenance", c -> {
      try (PreparedStatement ps = c.prepareStatement(maintainSql)) {
        ps.setString(1, ahead.toString());
        ps.setString(2, keep.toString());
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          return new PartitionMaintenanceValue(rs.getInt(1), rs.getInt(2));
        }
      }
    });
    String target = "partitions (ahead " + ahead + ", keep " + keep + ")";
    events.operatorAction("maintainPartitions", target, done.created() + done.dropped());
    LOG.info("operator action maintainPartitions on {}: {} created, {} dropped", target, done.created(), done.dropped());
    return done;
  }

  // ---------------------------------------------------------------------------------------------

  @FunctionalInterface
  private interface Work<R> {
    R run(Connection c) throws SQLException;
  }

  private <R> R read(String what, Work<R> work) {
    return context.inTransaction(tx -> {
      try {
        return work.run(tx.connection());
      } catch (SQLException e) {
        throw new DataAccessException("could not " + what + ": " + e.getMessage(), e);
      }
    });
  }

  /** Runs an action, then reports it: one event and one INFO line, with the rows it changed. */
  private long act(String action, String target, Work<Integer> work) {
    long rows = read(action + " " + target, work);
    events.operatorAction(action, target, rows);
    LOG.info("operator action {} on {}: {} row(s) changed", action, target, rows);
    return rows;
  }

  private static void checkLimit(int limit) {
    if (limit < 1 || limit > MAX_LIMIT) {
      throw new IllegalArgumentException("limit must be within 1 and " + MAX_LIMIT + ", was " + limit);
    }
  }

  private static void checkKey(IdempotencyKey key, long fence) {
    if (key == null) {
      throw new IllegalArgumentException("key must not be null");
    }
    if (fence < 1) {
      throw new IllegalArgumentException("fence must be at least 1 (tokens start at 1), was " + fence);
    }
  }
}
