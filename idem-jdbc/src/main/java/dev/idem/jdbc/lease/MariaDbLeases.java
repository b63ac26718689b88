package dev.idem.jdbc.lease;

import static dev.idem.jdbc.lease.Leases.EXPIRES_AT;
import static dev.idem.jdbc.lease.Leases.HOLDER;
import static dev.idem.jdbc.lease.Leases.LEASES;
import static dev.idem.jdbc.lease.Leases.PREVIOUS_HOLDER;
import static dev.idem.jdbc.lease.Leases.RESOURCE;
import static dev.idem.jdbc.lease.Leases.TOKEN;

import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.OwnTransaction;
import dev.idem.jdbc.internal.SqlStates;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Instant;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Query;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * {@link Leases}' grants, renewals and releases on MariaDB, where {@code INSERT ... ON DUPLICATE
 * KEY UPDATE} has neither a {@code WHERE} nor {@code RETURNING} (PostgreSQL's one statement does
 * both). A grant is an {@code UPDATE} of the row if its lease is free or ended, else the {@code
 * INSERT} of the first grant, then a read of what was written, in one transaction that commits at
 * once. The conditions are evaluated on the row's latest committed version under its lock (as
 * PostgreSQL's {@code ON CONFLICT} and {@code UPDATE} do), and at READ COMMITTED whatever the pool's
 * level: InnoDB takes no gap lock there, so racers for a new resource wait on the first one's
 * insert and then find its row, where at REPEATABLE READ their gap locks would deadlock. Every
 * statement that may wait for the row waits at most {@link Leases#LOCK_WAIT}, in whole seconds
 * ({@code innodb_lock_wait_timeout}), set for that statement only. Times are the database clock,
 * held as UTC {@code DATETIME}s.
 */
final class MariaDbLeases {
  /** MariaDB's duplicate key: error 1062. */
  private static final int DUPLICATE_KEY = 1062;

  private final Context idem;
  private final String takeOver;
  private final String insertFirst;
  private final String readGrant;
  private final String renew;
  private final String readEnd;
  private final String release;

  MariaDbLeases(Context idem) {
    this.idem = idem;
    DSLContext d = idem.dsl();
    Field<String> resource = DSL.val((String) null, RESOURCE);
    Field<String> holder = DSL.val((String) null, HOLDER);
    Field<Long> token = DSL.val((Long) null, TOKEN);
    Field<java.time.OffsetDateTime> until = DbTime.plusMicros(DbTime.clock(), DSL.val((Long) null, Long.class));
    // previous_holder first: MariaDB evaluates assignments left to right, each seeing the ones
    // before it, and it must record the holder being replaced.
    this.takeOver = bounded(d, d.update(LEASES)
        .set(PREVIOUS_HOLDER, HOLDER)
        .set(HOLDER, holder)
        .set(TOKEN, TOKEN.plus(DSL.inline(1L)))
        .set(EXPIRES_AT, until)
        .where(RESOURCE.eq(resource))
        .and(HOLDER.isNull().or(EXPIRES_AT.le(DbTime.clock()))));
    this.insertFirst = bounded(d, d.insertInto(LEASES, RESOURCE, HOLDER, TOKEN, EXPIRES_AT)
        .values(resource, holder, DSL.inline(1L), until));
    // The row is this transaction's own write: a plain read sees it.
    this.readGrant = d.render(d.select(TOKEN, EXPIRES_AT, PREVIOUS_HOLDER).from(LEASES).where(RESOURCE.eq(resource)));
    this.renew = bounded(d, d.update(LEASES)
        .set(EXPIRES_AT, until)
        .where(RESOURCE.eq(resource))
        .and(HOLDER.eq(holder))
        .and(TOKEN.eq(token))
        .and(EXPIRES_AT.gt(DbTime.clock())));
    this.readEnd = d.render(d.select(EXPIRES_AT).from(LEASES).where(RESOURCE.eq(resource)));
    this.release = bounded(d, d.update(LEASES)
        .set(HOLDER, DSL.inline((String) null)) // setNull binds a parameter on MariaDB
        .set(EXPIRES_AT, DbTime.clock())
        .where(RESOURCE.eq(resource))
        .and(HOLDER.eq(holder))
        .and(TOKEN.eq(token)));
  }

  /** {@code query} waiting at most {@link Leases#LOCK_WAIT} for a row lock, that statement only. */
  private static String bounded(DSLContext d, Query query) {
    long seconds = Math.max(1, (Leases.LOCK_WAIT.toMillis() + 999) / 1000);
    return "SET STATEMENT innodb_lock_wait_timeout = " + seconds + " FOR " + d.render(query);
  }

  /** A grant: its token, end and the holder it took over from (null if the lease was free). */
  record Grant(long token, Instant expiresAt, String previousHolder) {}

  /** See {@link Leases#acquire}; empty if the resource is held. */
  Optional<Grant> acquire(String resource, String holder, long ttlMicros) {
    return run(c -> {
      int taken;
      try (PreparedStatement ps = c.prepareStatement(takeOver)) {
        ps.setString(1, holder);
        ps.setLong(2, ttlMicros);
        ps.setString(3, resource);
        taken = ps.executeUpdate();
      }
      if (taken == 0) {
        try (PreparedStatement ps = c.prepareStatement(insertFirst)) {
          ps.setString(1, resource);
          ps.setString(2, holder);
          ps.setLong(3, ttlMicros);
          ps.executeUpdate();
        } catch (SQLException e) {
          if (e.getErrorCode() == DUPLICATE_KEY) {
            // The row exists and its lease lasts, or a racer's first grant committed while this
            // insert waited for it: held either way, as PostgreSQL's ON CONFLICT answers.
            return Optional.empty();
          }
          throw e;
        }
      }
      try (PreparedStatement ps = c.prepareStatement(readGrant)) {
        ps.setString(1, resource);
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          return Optional.of(new Grant(rs.getLong(1), utc(rs, 2), rs.getString(3)));
        }
      }
    });
  }

  /** See {@link Leases#renewUntil}. */
  Optional<Instant> renew(String resource, String holder, long token, long ttlMicros) {
    return run(c -> {
      try (PreparedStatement ps = c.prepareStatement(renew)) {
        ps.setLong(1, ttlMicros);
        ps.setString(2, resource);
        ps.setString(3, holder);
        ps.setLong(4, token);
        if (ps.executeUpdate() == 0) {
          return Optional.empty();
        }
      }
      try (PreparedStatement ps = c.prepareStatement(readEnd)) {
        ps.setString(1, resource);
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          return Optional.of(utc(rs, 1));
        }
      }
    });
  }

  /** See {@link Leases#release}. */
  boolean release(String resource, String holder, long token) {
    return run(c -> {
      try (PreparedStatement ps = c.prepareStatement(release)) {
        ps.setString(1, resource);
        ps.setString(2, holder);
        ps.setLong(3, token);
        return ps.executeUpdate() == 1;
      }
    });
  }

  /** A {@code DATETIME} holding UTC, read without the session's time zone ({@link DbTime#read}). */
  private static Instant utc(ResultSet rs, int column) throws SQLException {
    return DbTime.read(rs, column, true).toInstant();
  }

  /**
   * {@code work} in a READ COMMITTED transaction of its own, committed at once, or rolled back if
   * it fails ({@link SqlStates#isLockWaitTimeout} tells a lock wait that ran out).
   */
  private <T> T run(OwnTransaction.Work<T, SQLException> work) {
    try {
      return OwnTransaction.runReadCommitted(idem.dataSource(), work);
    } catch (SQLException e) {
      throw new DataAccessException("lease statement failed: " + e.getMessage(), e);
    }
  }

}
