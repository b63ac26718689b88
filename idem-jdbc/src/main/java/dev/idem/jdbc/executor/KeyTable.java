package dev.idem.jdbc.executor;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.param;
import static org.jooq.impl.DSL.selectOne;
import static org.jooq.impl.DSL.table;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Expiry;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.function.Function;
import org.jooq.CommonTableExpression;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.InsertOnDuplicateStep;
import org.jooq.Query;
import org.jooq.Record;
import org.jooq.Record1;
import org.jooq.Record9;
import org.jooq.Select;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The executor's SQL on {@code idem_keys}, rendered once per executor by jOOQ and run as JDBC
 * prepared statements, each a single round trip. Every time that decides anything is the
 * database's: {@code clock_timestamp()} where a statement may first wait on a lock,
 * {@code statement_timestamp()} where it cannot (the key read, what a write stamps).
 */
final class KeyTable {
  /** The key table's name, in idem's schema. */
  static final String TABLE = "idem_keys";
  /** Its primary key, the index a claim waits on for another copy's uncommitted row. */
  static final String PRIMARY_KEY = "idem_keys_pkey";
  static final Table<Record> KEYS = table(name("idem", TABLE));
  static final Field<String> SCOPE = column("scope", String.class);
  static final Field<String> KEY = column("key", String.class);
  static final Field<byte[]> FINGERPRINT = column("fingerprint", byte[].class);
  static final Field<String> STATE = column("state", String.class);
  static final Field<Long> FENCE = column("fence", Long.class);
  static final Field<OffsetDateTime> LEASE_EXPIRES_AT = column("lease_expires_at", OffsetDateTime.class);
  static final Field<String> CALL_KEY = column("call_key", String.class);
  static final Field<byte[]> RESULT = column("result", byte[].class);
  static final Field<OffsetDateTime> CREATED_AT = column("created_at", OffsetDateTime.class);
  static final Field<OffsetDateTime> COMPLETED_AT = column("completed_at", OffsetDateTime.class);
  static final Field<OffsetDateTime> EXPIRES_AT = column("expires_at", OffsetDateTime.class);

  static final String IN_FLIGHT = "I";
  static final String COMPLETED = "C";
  /** Name of the savepoint a joined call sets before its claim. */
  static final String SAVEPOINT = "idem_executor_claim";

  /** Sets lock_timeout back to what the claim saved in {@code idem.lock_timeout}. */
  private static final Field<String> RESTORED_WAIT =
      field("set_config('lock_timeout', current_setting('idem.lock_timeout'), true)", String.class);
  /** The database clock now: what every comparison (lease over? window over?) reads. */
  private static final Field<OffsetDateTime> NOW = Expiry.dbNow();
  /**
   * The database clock when the statement started: what a write stamps, one value for every
   * column of the row (so {@code expires_at - created_at} is exactly the window).
   */
  private static final Field<OffsetDateTime> STAMP = DbTime.statementTime();
  private static final Condition THIS_KEY =
      SCOPE.eq(param("scope", String.class)).and(KEY.eq(param("key", String.class)));
  /**
   * A row that may be deleted or claimed for a new intent: past its window and, if an external
   * claim is still in flight, past its lease too, so a slow holder never sees its row taken (and
   * the fence restart) under it.
   */
  static final Condition EXPIRABLE =
      EXPIRES_AT.le(NOW).and(STATE.eq(inline(COMPLETED)).or(LEASE_EXPIRES_AT.le(NOW)));

  /** Local claim: saves lock_timeout, sets the wait bound, claims or reads, restores lock_timeout. */
  final Sql claimLocal;
  /**
   * The local claim of a key with no row seen (the common, new key): the insert alone, lighter
   * than the claim-or-read. Zero rows back mean another copy got there first; the caller re-reads.
   */
  final Sql claimLocalInsert;
  /**
   * {@link dev.idem.jdbc.ClaimOrder#AT_COMMIT}: after the effect, bounds the wait, inserts the key
   * row completed with its result, restores the caller's wait, and commits, in one round trip. A plain insert: a row already
   * there (or one committed while this waited) is a unique violation, which makes PostgreSQL skip
   * the {@code COMMIT} and leaves the transaction to be rolled back, effect and all.
   */
  final Sql claimAtCommit;
  /** {@link #claimLocal} behind a savepoint, for a call that joins the caller's transaction. */
  final Sql claimLocalJoined;
  /**
   * The claim of a new key sent in one round trip with the caller's statements (see {@link
   * dev.idem.jdbc.internal.Pipelined}): bounds the wait, inserts the key row completed, and
   * restores the caller's wait once the row is in. A plain insert, as {@link #claimAtCommit} is: a
   * row already there (or one committed while this waited) is a unique violation, and PostgreSQL
   * skips the statements sent after it.
   */
  final Sql claimFirst;
  /** {@link #claimFirst} behind a savepoint, for a call that joins the caller's transaction. */
  final Sql claimFirstJoined;
  /** What ends the string of an owned call's {@link #claimFirst}: its transaction commits. */
  static final String COMMIT = "commit";
  /** What ends the string of a joined call's {@link #claimFirstJoined}: its savepoint is released. */
  static final String RELEASE = "release savepoint " + SAVEPOINT;
  /** Index of the claim's result set in {@link #claimLocal} and {@link #claimLocalJoined}. */
  static final int CLAIM_LOCAL_RESULT = 1;
  static final int CLAIM_LOCAL_JOINED_RESULT = 2;
  /** External phase 1: claims or reads, in autocommit (the claim is committed by itself). */
  final Sql claimExternal;
  /** The row as a new statement sees it: the READ COMMITTED loser's re-read. */
  final Sql read;
  /** A local re-claim of a row past its window, under the wait bound; result at index 1. */
  final Sql reclaimLocal;
  final Sql reclaimExternal;
  final Sql storeResultAndCommit;
  final Sql storeResultAndRelease;
  final Sql release;
  final Sql rollbackToSavepoint;
  /** Takes over an in-flight claim whose lease ended: fence + 1. */
  final Sql takeOver;
  /** External phase 3: records the result, fenced by the token. */
  final Sql complete;
  /** Ends a holder's lease at once (its call threw), fenced by the token. */
  final Sql endLease;
  final Sql fenceOf;

  KeyTable(Idem idem, Duration window, Duration lease, Duration inFlightWait) {
    DSLContext dsl = idem.dsl();
    Field<OffsetDateTime> expiresAt = plus(STAMP, window);
    Field<OffsetDateTime> leaseEnds = plus(STAMP, lease);
    // lock_timeout 0 means "wait forever" to PostgreSQL; a zero bound means "answer at once".
    long waitMillis = Math.max(1, inFlightWait.toMillis());
    // set_config(..., true) lasts until the transaction ends, so the caller's own setting is saved
    // and restored around every claim: the caller's statements, and the deferred checks its COMMIT
    // runs, wait as the caller set them to.
    Query saveAndSetWait = DSL.resultQuery(
        "select set_config('lock_timeout', {0}, true) from"
            + " (select set_config('idem.lock_timeout', current_setting('lock_timeout'), true)) as saved",
        inline(waitMillis + "ms"));
    Query restoreWait = DSL.select(RESTORED_WAIT);
    Query savepoint = DSL.query("savepoint " + SAVEPOINT);
    Query releaseSavepoint = DSL.query(RELEASE);

    Select<?> local = claim(dsl, inline(COMPLETED), inline((OffsetDateTime) null), DSL.castNull(SQLDataType.CLOB), STAMP, expiresAt);
    claimLocal = Sql.of(dsl, saveAndSetWait, local, restoreWait);
    claimLocalInsert = Sql.of(dsl, saveAndSetWait,
        insert(dsl, inline(COMPLETED), inline((OffsetDateTime) null), DSL.castNull(SQLDataType.CLOB), STAMP, expiresAt)
            .onConflictDoNothing()
            .returningResult(inline(true), FENCE),
        restoreWait);
    claimAtCommit = Sql.of(dsl, saveAndSetWait, plainClaim(dsl, expiresAt, param("result", byte[].class)), DSL.query(COMMIT));
    claimLocalJoined = Sql.of(dsl, savepoint, saveAndSetWait, local, restoreWait);
    claimFirst = Sql.of(dsl, saveAndSetWait, plainClaim(dsl, expiresAt, DSL.castNull(SQLDataType.BLOB)));
    claimFirstJoined = Sql.of(dsl, savepoint, saveAndSetWait, plainClaim(dsl, expiresAt, DSL.castNull(SQLDataType.BLOB)));
    claimExternal = Sql.of(dsl, claim(dsl, inline(IN_FLIGHT), leaseEnds, param("call_key", String.class),
        DSL.castNull(SQLDataType.TIMESTAMPWITHTIMEZONE), expiresAt));
    // A read waits on nothing, so its statement's start is "now": statement_timestamp() is read
    // once per statement, where each clock_timestamp() asks the clock again.
    read = Sql.of(dsl, existing(dsl, DSL.noCondition(), STAMP));
    reclaimLocal = Sql.of(dsl, saveAndSetWait, reclaim(dsl, inline(COMPLETED), inline((OffsetDateTime) null),
        DSL.castNull(SQLDataType.CLOB), STAMP, expiresAt), restoreWait);
    reclaimExternal = Sql.of(dsl, reclaim(dsl, inline(IN_FLIGHT), leaseEnds, param("call_key", String.class),
        DSL.castNull(SQLDataType.TIMESTAMPWITHTIMEZONE), expiresAt));
    Query storeResult = dsl.update(KEYS)
        .set(RESULT, param("result", byte[].class))
        .set(COMPLETED_AT, STAMP)
        .where(THIS_KEY);
    storeResultAndCommit = Sql.of(dsl, storeResult, DSL.query(COMMIT));
    storeResultAndRelease = Sql.of(dsl, storeResult, releaseSavepoint);
    release = Sql.of(dsl, releaseSavepoint);
    rollbackToSavepoint = Sql.of(dsl, DSL.query("rollback to savepoint " + SAVEPOINT), releaseSavepoint);
    takeOver = Sql.of(dsl, dsl.update(KEYS)
        .set(FENCE, FENCE.plus(inline(1L)))
        .set(LEASE_EXPIRES_AT, leaseEnds)
        .where(THIS_KEY)
        .and(STATE.eq(inline(IN_FLIGHT)))
        .and(FENCE.eq(param("fence", Long.class)))
        .and(LEASE_EXPIRES_AT.le(NOW))
        .returningResult(FENCE));
    complete = Sql.of(dsl, dsl.update(KEYS)
        .set(STATE, inline(COMPLETED))
        .set(RESULT, param("result", byte[].class))
        .set(COMPLETED_AT, STAMP)
        .set(LEASE_EXPIRES_AT, inline((OffsetDateTime) null))
        .where(THIS_KEY)
        .and(STATE.eq(inline(IN_FLIGHT)))
        .and(FENCE.eq(param("fence", Long.class)))
        .returningResult(FENCE));
    endLease = Sql.of(dsl, dsl.update(KEYS)
        .set(LEASE_EXPIRES_AT, NOW)
        .where(THIS_KEY)
        .and(STATE.eq(inline(IN_FLIGHT)))
        .and(FENCE.eq(param("fence", Long.class))));
    fenceOf = Sql.of(dsl, dsl.select(FENCE).from(KEYS).where(THIS_KEY));
  }

  /**
   * Claims the key by an insert under the primary key, or returns the row already there, in one
   * statement. Zero rows come back when the insert waited for another transaction's claim that
   * committed meanwhile: under READ COMMITTED this statement's snapshot cannot see that row, and
   * the caller re-reads it with {@link #read} (a new statement, a new snapshot).
   */
  private static Select<?> claim(DSLContext dsl, Field<String> state, Field<OffsetDateTime> leaseEnds,
      Field<String> callKey, Field<OffsetDateTime> completedAt, Field<OffsetDateTime> expiresAt) {
    CommonTableExpression<Record1<Long>> inserted = name("inserted").as(
        insert(dsl, state, leaseEnds, callKey, completedAt, expiresAt).onConflictDoNothing().returningResult(FENCE));
    return dsl.with(inserted)
        .select(inline(true).as("claimed"), inserted.field(FENCE),
            DSL.castNull(SQLDataType.BLOB), DSL.castNull(SQLDataType.CHAR(1)), DSL.castNull(SQLDataType.BLOB),
            DSL.castNull(SQLDataType.DOUBLE), DSL.castNull(SQLDataType.DOUBLE),
            DSL.castNull(SQLDataType.DOUBLE), DSL.castNull(SQLDataType.DOUBLE))
        .from(inserted)
        .unionAll(existing(dsl, DSL.notExists(selectOne().from(inserted)), NOW));
  }

  /**
   * A local key row inserted completed, with {@code result}, by a plain insert (no {@code ON
   * CONFLICT}): a row already there is a unique violation, which ends the string it was sent in.
   * RETURNING runs once the row and its index entry are in: the wait is over, and the caller's
   * lock_timeout is back before anything sent after it (the caller's statements, a COMMIT running
   * the caller's deferred checks).
   */
  private static Query plainClaim(DSLContext dsl, Field<OffsetDateTime> expiresAt, Field<byte[]> result) {
    return insert(dsl, inline(COMPLETED), inline((OffsetDateTime) null), DSL.castNull(SQLDataType.CLOB), STAMP, expiresAt, result)
        .returningResult(RESTORED_WAIT);
  }

  /** The claim's insert under the primary key, with no result yet (callers add {@code ON CONFLICT DO NOTHING}). */
  private static InsertOnDuplicateStep<Record> insert(DSLContext dsl, Field<String> state,
      Field<OffsetDateTime> leaseEnds, Field<String> callKey, Field<OffsetDateTime> completedAt,
      Field<OffsetDateTime> expiresAt) {
    return insert(dsl, state, leaseEnds, callKey, completedAt, expiresAt, DSL.castNull(SQLDataType.BLOB));
  }

  private static InsertOnDuplicateStep<Record> insert(DSLContext dsl, Field<String> state,
      Field<OffsetDateTime> leaseEnds, Field<String> callKey, Field<OffsetDateTime> completedAt,
      Field<OffsetDateTime> expiresAt, Field<byte[]> result) {
    return dsl.insertInto(KEYS)
        .columns(SCOPE, KEY, FINGERPRINT, STATE, FENCE, LEASE_EXPIRES_AT, CALL_KEY, RESULT, CREATED_AT, COMPLETED_AT, EXPIRES_AT)
        .values(param("scope", String.class), param("key", String.class), param("fingerprint", byte[].class),
            state, inline(1L), leaseEnds, callKey, result, STAMP, completedAt, expiresAt);
  }

  /** The row of the key, in the shape {@link Row#from} reads. */
  private static Select<Record9<Boolean, Long, byte[], String, byte[], Double, Double, Double, Double>> existing(
      DSLContext dsl, Condition also, Field<OffsetDateTime> now) {
    // The row's times with the database's "now" beside them, as float8 epoch seconds: Row.from
    // turns them into microseconds, compares and subtracts them (every one a database time). Not
    // as timestamptz, because pgjdbc builds a TimestampUtils with its calendars for every result
    // set it decodes a timestamp from; not converted to microseconds here, because PostgreSQL
    // sets up each function of a statement's expressions again on every execution, and the
    // multiplication and cast of each time cost more server time than the key read's index scan.
    return dsl.select(inline(false).as("claimed"), FENCE, FINGERPRINT, STATE, RESULT, epochSeconds(COMPLETED_AT),
        epochSeconds(LEASE_EXPIRES_AT), epochSeconds(EXPIRES_AT), epochSeconds(now))
        .from(KEYS)
        .where(THIS_KEY)
        .and(also);
  }

  /** Takes a row past its window for a new intent: fence + 1, so any holder from its past life is refused. */
  private static Query reclaim(DSLContext dsl, Field<String> state, Field<OffsetDateTime> leaseEnds,
      Field<String> callKey, Field<OffsetDateTime> completedAt, Field<OffsetDateTime> expiresAt) {
    return dsl.update(KEYS)
        .set(FINGERPRINT, param("fingerprint", byte[].class))
        .set(STATE, state)
        .set(FENCE, FENCE.plus(inline(1L)))
        .set(LEASE_EXPIRES_AT, leaseEnds)
        .set(CALL_KEY, callKey)
        .set(RESULT, inline((byte[]) null))
        .set(CREATED_AT, STAMP)
        .set(COMPLETED_AT, completedAt)
        .set(EXPIRES_AT, expiresAt)
        .where(THIS_KEY)
        .and(EXPIRABLE)
        .returningResult(FENCE);
  }

  private static Field<OffsetDateTime> plus(Field<OffsetDateTime> t, Duration d) {
    return DbTime.plusMicros(t, inline(DbTime.micros(d)));
  }

  /** {@code t} in seconds since the epoch, as float8 (PostgreSQL's date_part); see {@link #micros(double)}. */
  static Field<Double> epochSeconds(Field<OffsetDateTime> t) {
    return field("date_part('epoch', {0})", Double.class, t);
  }

  /**
   * A time read by {@link #epochSeconds}, in microseconds since the epoch: exact until 2106 (2^32
   * seconds after the epoch). date_part gives the float8 nearest to the stored microseconds, and
   * that times 10^6 stays within half a microsecond of them until then, so rounding to the nearest
   * gives them back. Past 2106 a time may be off by one microsecond (a reported age, the moment a
   * window ends), never more. KeyTableTimesTest checks both against extract()'s exact numeric.
   */
  static long micros(double epochSeconds) {
    return (long) Math.rint(epochSeconds * 1_000_000.0);
  }

  private static <T> Field<T> column(String column, Class<T> type) {
    return field(name("idem", "idem_keys", column), type);
  }

  /**
   * A key's row as a claim saw it.
   *
   * @param claimed whether this statement inserted it (then only {@code fence} is set)
   * @param expirable past its window (and lease): free for a new intent, see {@link #EXPIRABLE}
   * @param pastWindow past its window, expirable or not (an external attempt still holding its
   *     lease keeps the row): no longer the key of the intent that wrote it
   * @param leaseLeft time left on an in-flight claim's lease (negative once over); null if none
   */
  record Row(boolean claimed, long fence, byte[] fingerprint, String state, byte[] result,
      Instant completedAt, Duration age, Duration leaseLeft, boolean expirable, boolean pastWindow) {

    static Row from(ResultSet rs) throws SQLException {
      if (!rs.next()) {
        return null;
      }
      boolean claimed = rs.getBoolean(1);
      long fence = rs.getLong(2);
      if (claimed) {
        return new Row(true, fence, null, null, null, null, null, null, false, false);
      }
      String state = rs.getString(4);
      // Epoch seconds, every one from the database clock; null where the column is.
      double completedSeconds = rs.getDouble(6);
      boolean isCompleted = !rs.wasNull();
      double leaseSeconds = rs.getDouble(7);
      boolean hasLease = !rs.wasNull();
      long completed = micros(completedSeconds);
      long leaseEnds = micros(leaseSeconds);
      long expiresAt = micros(rs.getDouble(8));
      long now = micros(rs.getDouble(9));
      // the same test as EXPIRABLE, on the row's own times and the database's now
      boolean pastWindow = expiresAt <= now;
      boolean expirable = pastWindow && (COMPLETED.equals(state) || (hasLease && leaseEnds <= now));
      return new Row(false, fence, rs.getBytes(3), state, rs.getBytes(5),
          isCompleted ? Instant.ofEpochSecond(Math.floorDiv(completed, 1_000_000L), Math.floorMod(completed, 1_000_000L) * 1000) : null,
          isCompleted ? duration(Math.max(0, now - completed)) : Duration.ZERO,
          hasLease ? duration(leaseEnds - now) : null,
          expirable, pastWindow);
    }

    private static Duration duration(long micros) {
      return Duration.ofNanos(micros * 1000);
    }

    boolean completed() {
      return COMPLETED.equals(state);
    }

    boolean leaseLive() {
      return leaseLeft != null && leaseLeft.compareTo(Duration.ZERO) > 0;
    }
  }

  /** Runs {@code sql} and reads the row from its {@code index}-th result, or null if it has none. */
  static Row row(Connection c, Sql sql, int index, Function<String, Object> binds) throws SQLException {
    try (PreparedStatement ps = sql.prepare(c, binds)) {
      try (ResultSet rs = Sql.resultAt(ps, index)) {
        return Row.from(rs);
      }
    }
  }

  /** Runs {@code sql} and returns the single long of its {@code index}-th result, or null if no row. */
  static Long single(Connection c, Sql sql, int index, Function<String, Object> binds) throws SQLException {
    try (PreparedStatement ps = sql.prepare(c, binds)) {
      try (ResultSet rs = Sql.resultAt(ps, index)) {
        return rs.next() ? rs.getLong(1) : null;
      }
    }
  }

  /** Runs {@code sql}, ignoring what it returns. */
  static int run(Connection c, Sql sql, Function<String, Object> binds) throws SQLException {
    try (PreparedStatement ps = sql.prepare(c, binds)) {
      ps.execute();
      return ps.getUpdateCount();
    }
  }
}
