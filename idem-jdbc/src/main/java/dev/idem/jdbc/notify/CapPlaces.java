package dev.idem.jdbc.notify;

import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.OwnTransaction;
import dev.idem.jdbc.internal.claim.Sql;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.jooq.DSLContext;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The places of one {@link Cap}: a send takes one in its recipient's row of {@code
 * idem_notification_caps}, which keeps the times of the sends within the cap's window, oldest
 * first, at most the limit of them, all read from the database clock. Taking a place locks the
 * recipient's row, so racing senders take places one at a time and never more than the limit
 * within the window, at every isolation level.
 */
final class CapPlaces {
  private final Context context;
  private final Cap cap;
  /** PostgreSQL: the one statement. */
  private final Sql takePlace;
  /** MariaDB: the row made sure of and locked, its times and the clock read, the times written. */
  private final Sql lockRow;
  private final Sql readTimes;
  private final Sql writeTimes;

  CapPlaces(Context context, Cap cap) {
    this.context = context;
    this.cap = cap;
    DSLContext dsl = context.dsl();
    Table<?> caps = DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_notification_caps"));
    var name = DSL.param("cap", String.class);
    var recipient = DSL.param("recipient", String.class);
    if (context.mariadb()) {
      this.takePlace = null;
      // The row is made sure of first with an upsert, which locks it exclusively whether it was
      // there or not: a locking read of a missing row would take a gap lock instead, and two
      // senders holding one on the same gap deadlock when both insert.
      this.lockRow = Sql.of(dsl, DSL.query("insert into {0} (cap, recipient, sent_at) values ({1}, {2}, '[]')"
          + " on duplicate key update sent_at = sent_at", caps, name, recipient));
      // The clock is read after the lock is held: the time of the place is when it was taken.
      this.readTimes = Sql.of(dsl, DSL.resultQuery("select sent_at, timestampdiff(microsecond, '1970-01-01', {0})"
          + " from {1} where cap = {2} and recipient = {3} for update", DbTime.clock(), caps, name, recipient));
      this.writeTimes = Sql.of(dsl, DSL.query("update {0} set sent_at = {1} where cap = {2} and recipient = {3}",
          caps, DSL.param("sent_at", String.class), name, recipient));
    } else {
      var since = DSL.field("clock_timestamp() - {0} * interval '1 microsecond'", SQLDataType.TIMESTAMPWITHTIMEZONE,
          DSL.inline(DbTime.micros(cap.per())));
      // ON CONFLICT DO UPDATE locks the recipient's row and checks its condition on the newest
      // version, so racing senders take places one at a time.
      this.takePlace = Sql.of(dsl, DSL.resultQuery("insert into {0} as c (cap, recipient, sent_at)"
          + " values ({1}, {2}, array[clock_timestamp()]) on conflict (cap, recipient) do update"
          + " set sent_at = array(select t from unnest(c.sent_at) as t where t > {3} order by t) || clock_timestamp()"
          + " where (select count(*) from unnest(c.sent_at) as t where t > {3}) < {4} returning 1",
          caps, name, recipient, since, DSL.inline(cap.limit())));
      this.lockRow = null;
      this.readTimes = null;
      this.writeTimes = null;
    }
  }

  /**
   * Takes a place for a send to {@code recipient}, committed before this returns.
   *
   * @return false if the recipient's sends within the window are at the limit (nothing is written)
   */
  boolean take(String recipient) {
    Function<String, Object> values = n -> n.equals("cap") ? cap.name() : recipient;
    if (takePlace == null) {
      return context.autoCommit("idem notifications", c -> OwnTransaction.on(c, tx -> takeOnMariaDb(tx, values)));
    }
    return context.autoCommit("idem notifications", c -> {
      try (var ps = takePlace.prepare(c, values); var rs = ps.executeQuery()) {
        return rs.next();
      }
    });
  }

  private boolean takeOnMariaDb(Connection c, Function<String, Object> values) throws SQLException {
    try (PreparedStatement ps = lockRow.prepare(c, values)) {
      ps.executeUpdate();
    }
    String held;
    long now;
    try (PreparedStatement ps = readTimes.prepare(c, values); ResultSet rs = ps.executeQuery()) {
      rs.next();
      held = rs.getString(1);
      now = rs.getLong(2);
    }
    long since = now - DbTime.micros(cap.per());
    List<Long> kept = new ArrayList<>();
    for (long t : microsOf(held)) {
      if (t > since) {
        kept.add(t);
      }
    }
    if (kept.size() >= cap.limit()) {
      return false;
    }
    kept.add(now);
    kept.sort(null); // a clock stepped back still leaves them oldest first
    String times = kept.stream().map(String::valueOf).collect(Collectors.joining(",", "[", "]"));
    try (PreparedStatement ps = writeTimes.prepare(c, n -> n.equals("sent_at") ? times : values.apply(n))) {
      ps.executeUpdate();
    }
    return true;
  }

  /**
   * The times of a MariaDB row's {@code sent_at}: a JSON array of microseconds since the epoch, as
   * {@link #takeOnMariaDb} writes it.
   *
   * @throws IllegalStateException if it is anything else
   */
  static long[] microsOf(String json) {
    String s = json == null ? "" : json.strip();
    if (!s.startsWith("[") || !s.endsWith("]")) {
      throw new IllegalStateException("idem_notification_caps.sent_at is not a JSON array of microseconds: " + json);
    }
    String inner = s.substring(1, s.length() - 1).strip();
    if (inner.isEmpty()) {
      return new long[0];
    }
    try {
      return java.util.Arrays.stream(inner.split(",")).map(String::strip).mapToLong(Long::parseLong).toArray();
    } catch (NumberFormatException e) {
      throw new IllegalStateException("idem_notification_caps.sent_at is not a JSON array of microseconds: " + json, e);
    }
  }
}
