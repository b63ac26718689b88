package dev.idem.jdbc.lease;

import dev.idem.fence.FencingToken;
import dev.idem.fence.StaleFenceException;
import dev.idem.internal.Events;
import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.tx.TxCallback;
import dev.idem.jdbc.internal.OwnTransaction;
import dev.idem.jdbc.internal.SqlStates;
import java.sql.Statement;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Driver;
import dev.idem.jdbc.internal.Expiry;
import dev.idem.key.IdempotencyKey;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record1;
import org.jooq.Record3;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * Leases on named resources, with fencing tokens, in the table {@code idem_leases}.
 *
 * <pre>{@code
 * Optional<Lease> lease = idem.leases().acquire("nightly-report", "worker-7", Duration.ofSeconds(30));
 * lease.ifPresent(l -> l.fenced(tx -> { ...write under the lease...; return null; }));
 * }</pre>
 *
 * <h2>Guarantees</h2>
 *
 * <ul>
 *   <li>At most one holder at a time by the database clock: a resource is granted only when it is
 *       free, released, or its lease has ended ({@code expires_at <= clock_timestamp()}). JVM clocks
 *       decide nothing.
 *   <li>Every grant's token is the previous grant's plus one; the row is never deleted, so tokens
 *       strictly grow across holders for the life of the table.
 *   <li>A write checked with {@link #checkFence} (or made through {@link Lease#fenced}) carrying a
 *       token lower than the latest grant is refused with {@link StaleFenceException} before it
 *       writes anything; the check holds a share lock on the lease row until the writing
 *       transaction ends, so no grant can happen between the check and the commit.
 *   <li>A grant that takes over an ended lease emits {@code LeaseTakenOver} to the listener; a
 *       refused stale token emits {@code StaleFence} just before its exception is thrown.
 * </ul>
 *
 * <h2>Where it stops</h2>
 *
 * <ul>
 *   <li>A lease is not a lock. Its holder may go on running after it ended (a GC pause, a slow
 *       network) and not know it. Only writes that check the token are protected; a write that
 *       does not check it (an e-mail, a call to a third party) can still happen twice: give those
 *       an idempotency key.
 *   <li>The fence admits the latest grant's token even after that lease ended, as long as no one
 *       was granted the resource since: no one with a later right has acted.
 *   <li>The check only protects writes to this database, in the transaction that ran the check.
 *       For rows in your own tables that must refuse stale writers on their own, keep the token in
 *       the row: {@code Transitions.writeFenced}.
 * </ul>
 *
 * <p>Grants, renewals and releases are single statements that commit at once on a connection of
 * their own from the {@code DataSource}, never in a transaction open on the calling thread: a grant
 * must be seen by others to mean anything. Thread-safe.
 *
 * <p>On MariaDB the same guarantees, by other statements: the database clock is {@code
 * SYSDATE(6)} in UTC, a grant is an {@code UPDATE} of the row if it is free or ended, else the
 * insert of the first grant, read back in the same short transaction (at READ COMMITTED, whatever
 * the pool's level), and the fence check's share lock is {@code LOCK IN SHARE MODE}. The bound
 * {@link #LOCK_WAIT} is in whole seconds there ({@code innodb_lock_wait_timeout}).
 */
public final class Leases {
  /** The longest lease granted: long leases hide dead holders; renew instead. */
  public static final Duration MAX_TTL = Duration.ofDays(1);

  /** The shortest lease granted: the database clock counts in microseconds. */
  public static final Duration MIN_TTL = Duration.ofMillis(1);

  static final Table<?> LEASES = DSL.table(DSL.name(Context.DEFAULT_SCHEMA, "idem_leases"));
  private static final Table<?> L = LEASES.as("l");
  static final Field<String> RESOURCE = DSL.field(DSL.name("resource"), String.class);
  static final Field<String> HOLDER = DSL.field(DSL.name("holder"), String.class);
  static final Field<Long> TOKEN = DSL.field(DSL.name("token"), Long.class);
  static final Field<OffsetDateTime> EXPIRES_AT = DSL.field(DSL.name("expires_at"), OffsetDateTime.class);
  static final Field<String> PREVIOUS_HOLDER = DSL.field(DSL.name("previous_holder"), String.class);
  // The existing row in ON CONFLICT DO UPDATE, as opposed to excluded (the row proposed).
  private static final Field<String> L_HOLDER = DSL.field(DSL.name("l", "holder"), String.class);
  private static final Field<Long> L_TOKEN = DSL.field(DSL.name("l", "token"), Long.class);
  private static final Field<OffsetDateTime> L_EXPIRES_AT = DSL.field(DSL.name("l", "expires_at"), OffsetDateTime.class);

  /**
   * The longest a grant, renewal or release waits for the lease's row while a holder writes under
   * its fence ({@link #fenced}, which locks the row until its transaction ends): then acquire
   * answers empty (the resource is held), renew and release throw, and nothing changes.
   */
  public static final Duration LOCK_WAIT = Duration.ofSeconds(2);

  private final Context idem;
  private final Events events;
  /** The statements for MariaDB, made on first use there; PostgreSQL's are built per call. */
  private volatile MariaDbLeases mariadb;

  private Leases(Context idem) {
    this.idem = Require.notNull(idem, "idem");
    this.events = Events.to(idem.listener(), "leases");
  }

  /** MariaDB's statements if this context is on MariaDB, else null. */
  private MariaDbLeases onMariaDb() {
    if (!idem.mariadb()) {
      return null;
    }
    MariaDbLeases m = mariadb;
    if (m == null) {
      mariadb = m = new MariaDbLeases(idem); // a race renders the same statements twice, harmless
    }
    return m;
  }

  static {
    Factories.register(Leases.class, Void.class, Leases.class, (context, none) -> new Leases(context));
  }

  /**
   * Grants {@code resource} to {@code holder} for {@code ttl} (database clock) if it is free,
   * released, or its lease has ended; with a token one higher than the last grant's (1 for the
   * first). A holder that already holds a live lease is not granted it again: renew it.
   *
   * @param resource what the lease is on, checked like an idempotency key (visible ASCII, 1 to 255)
   * @param holder who asks, e.g. a worker id; checked likewise
   * @param ttl from {@link #MIN_TTL} to {@link #MAX_TTL}
   * @return the lease, or empty if someone holds a live lease on the resource
   */
  public Optional<Lease> acquire(String resource, String holder, Duration ttl) {
    IdempotencyKey.check("resource", resource);
    IdempotencyKey.check("holder", holder);
    Field<OffsetDateTime> until = until(ttl);
    MariaDbLeases maria = onMariaDb();
    if (maria != null) {
      return retried(Optional.<MariaDbLeases.Grant>empty(), () -> maria.acquire(resource, holder, DbTime.micros(ttl)))
          .map(g -> granted(resource, holder, g.token(), g.expiresAt(), g.previousHolder()));
    }
    Optional<Record3<Long, OffsetDateTime, String>> granted = bounded(Optional.empty(), dsl -> dsl
        .insertInto(L, RESOURCE, HOLDER, TOKEN, EXPIRES_AT)
        .values(DSL.val(resource), DSL.val(holder), DSL.inline(1L), until)
        .onConflict(RESOURCE)
        .doUpdate()
        .set(HOLDER, DSL.excluded(HOLDER))
        .set(TOKEN, L_TOKEN.plus(DSL.inline(1L)))
        .set(EXPIRES_AT, DSL.excluded(EXPIRES_AT))
        // SET sees the existing row: this records who held the lease that is being taken over.
        .set(PREVIOUS_HOLDER, L_HOLDER)
        .where(L_HOLDER.isNull().or(L_EXPIRES_AT.le(DbTime.clock())))
        .returning(TOKEN, EXPIRES_AT, PREVIOUS_HOLDER)
        .fetchOptional()
        .map(r -> r.into(TOKEN, EXPIRES_AT, PREVIOUS_HOLDER)));
    return granted.map(r -> granted(resource, holder, r.value1(), r.value2().toInstant(), r.value3()));
  }

  /** The lease of a grant; a takeover (a previous holder) is told to the listener. */
  private Lease granted(String resource, String holder, long tokenValue, Instant expiresAt, String previous) {
    FencingToken token = new FencingToken(tokenValue);
    if (previous != null) {
      events.leaseTakenOver(IdempotencyKey.of("lease", resource), token.value() - 1, token.value());
    }
    return new Lease(this, resource, holder, token, expiresAt, previous);
  }

  /**
   * Renews the lease granted to {@code holder} with {@code token}, for a holder that kept its
   * token but not its {@link Lease} object (e.g. across a restart). See {@link Lease#renew}.
   *
   * @return true if renewed; false if that grant has ended or is not the latest (nothing changed)
   */
  public boolean renew(String resource, String holder, FencingToken token, Duration ttl) {
    return renewUntil(resource, holder, token, ttl).isPresent();
  }

  Optional<Instant> renewUntil(String resource, String holder, FencingToken token, Duration ttl) {
    IdempotencyKey.check("resource", resource);
    IdempotencyKey.check("holder", holder);
    Require.notNull(token, "token");
    Field<OffsetDateTime> until = until(ttl);
    // Only the latest grant, only while it lasts: a lapsed holder must acquire again and get a new
    // token, so it can never carry an old token into a time after someone else could have held it.
    MariaDbLeases maria = onMariaDb();
    if (maria != null) {
      return retried(null, () -> maria.renew(resource, holder, token.value(), DbTime.micros(ttl)));
    }
    return bounded(null, dsl -> dsl.update(LEASES)
        .set(EXPIRES_AT, until)
        .where(RESOURCE.eq(resource))
        .and(HOLDER.eq(holder))
        .and(TOKEN.eq(token.value()))
        .and(EXPIRES_AT.gt(DbTime.clock()))
        .returning(EXPIRES_AT)
        .fetchOptional()
        .map(r -> r.get(EXPIRES_AT).toInstant()));
  }

  /**
   * Releases the grant of {@code resource} to {@code holder} with {@code token}. See {@link
   * Lease#release}.
   */
  public boolean release(String resource, String holder, FencingToken token) {
    IdempotencyKey.check("resource", resource);
    IdempotencyKey.check("holder", holder);
    Require.notNull(token, "token");
    MariaDbLeases maria = onMariaDb();
    if (maria != null) {
      return retried(null, () -> maria.release(resource, holder, token.value()));
    }
    return bounded(null, dsl -> dsl.update(LEASES)
        .setNull(HOLDER)
        .set(EXPIRES_AT, DbTime.clock())
        .where(RESOURCE.eq(resource))
        .and(HOLDER.eq(holder))
        .and(TOKEN.eq(token.value()))
        .execute()) == 1;
  }

  /**
   * Checks, inside the caller's transaction on {@code tx}, that {@code token} is the latest grant
   * on {@code resource}, and locks the lease row (FOR SHARE) until that transaction ends, so no
   * new grant happens before the caller's write commits. Call it before the write, in the same
   * transaction.
   *
   * @throws StaleFenceException if a later grant exists (its token is {@link
   *     StaleFenceException#highest()}); write nothing and stop
   * @throws IllegalArgumentException if {@code tx} is in auto-commit mode (the lock would end at
   *     once and protect nothing), no lease was ever granted on {@code resource}, or {@code token}
   *     was never granted (higher than the latest)
   */
  public void checkFence(Connection tx, String resource, FencingToken token) {
    Require.notNull(tx, "tx");
    IdempotencyKey.check("resource", resource);
    Require.notNull(token, "token");
    Driver.refuseUnjoinable(tx, "the fence check on " + resource);
    try {
      if (tx.getAutoCommit()) {
        throw new IllegalArgumentException("tx is in auto-commit mode: checkFence must run in the transaction"
            + " that writes, or its lock ends before the write");
      }
    } catch (SQLException e) {
      throw new DataAccessException("could not read the connection's auto-commit mode", e);
    }
    Long latest = idem.dsl(tx)
        .select(TOKEN)
        .from(LEASES)
        .where(RESOURCE.eq(resource))
        .forShare()
        .fetchOptional(Record1::value1)
        .orElseThrow(() -> new IllegalArgumentException("no lease was ever granted on resource " + resource));
    if (token.value() < latest) {
      events.staleFence(resource, token.value(), latest);
      throw new StaleFenceException(resource, token.value(), latest);
    }
    if (token.value() > latest) {
      throw new IllegalArgumentException("token " + token.value() + " was never granted on resource " + resource
          + ": the latest grant is " + latest);
    }
  }

  /**
   * Runs {@code write} in a transaction (joining the one open on this thread) after {@link
   * #checkFence}; a stale token throws before {@code write} runs.
   */
  public <T, X extends Exception> T fenced(String resource, FencingToken token, TxCallback<T, X> write) throws X {
    IdempotencyKey.check("resource", resource);
    Require.notNull(token, "token");
    Require.notNull(write, "write");
    return idem.inTransaction(tx -> {
      checkFence(tx.connection(), resource, token);
      return write.apply(tx);
    });
  }

  /**
   * In the caller's transaction on {@code tx}: {@link #checkFence}, then {@code write} on the same
   * connection. A stale token throws before {@code write} runs; if {@code write} throws, roll your
   * transaction back. idem neither commits nor rolls back {@code tx}.
   */
  public <T, X extends Exception> T fenced(Connection tx, String resource, FencingToken token, TxCallback<T, X> write)
      throws X {
    Require.notNull(write, "write");
    Tx joined = idem.joined(tx, "the fenced write on " + resource);
    checkFence(tx, resource, token);
    return write.apply(joined);
  }

  private static Field<OffsetDateTime> until(Duration ttl) {
    Require.positive(ttl, "ttl");
    if (ttl.compareTo(MIN_TTL) < 0 || ttl.compareTo(MAX_TTL) > 0) {
      throw new IllegalArgumentException("ttl must be from " + MIN_TTL + " to " + MAX_TTL + ", was " + ttl);
    }
    return DbTime.plusMicros(DbTime.clock(), DSL.val(DbTime.micros(ttl)));
  }

  /**
   * One statement in a transaction of its own, committed at once, whatever this thread has open,
   * waiting at most {@link #LOCK_WAIT} for the lease's row (a holder inside {@link #fenced} keeps it
   * locked until its write commits); {@code whenBusy} if that wait runs out. Run again within the
   * retry budget if it waited for a competing grant and failed with 40001 (a pool at REPEATABLE
   * READ or SERIALIZABLE), so a lost race answers as under READ COMMITTED: empty or false.
   */
  private <T> T bounded(T whenBusy, java.util.function.Function<DSLContext, T> statement) {
    return retried(whenBusy, () -> OwnTransaction.run(idem.dataSource(), c -> {
      try (Statement st = c.createStatement()) {
        st.execute("set local lock_timeout = '" + LOCK_WAIT.toMillis() + "ms'");
      } catch (SQLException e) {
        throw new DataAccessException("lease statement failed: " + e.getMessage(), e);
      }
      return statement.apply(idem.dsl(c));
    }));
  }

  /**
   * {@code run}, a grant, renewal or release in a transaction of its own, run again as {@link
   * #bounded} says; {@code whenBusy} (or, if null, an {@link IllegalStateException}) when its lock
   * wait ran out: PostgreSQL's lock_timeout, MariaDB's innodb_lock_wait_timeout.
   */
  private <T> T retried(T whenBusy, java.util.function.Supplier<T> run) {
    Context.Runs runs = idem.runs();
    while (true) {
      try {
        return run.get();
      } catch (DataAccessException e) {
        if (SqlStates.is(e, SqlStates.LOCK_NOT_AVAILABLE) || SqlStates.isLockWaitTimeout(e)) {
          if (whenBusy == null) {
            throw new IllegalStateException("the lease's row stayed locked for " + LOCK_WAIT + " by a write under its"
                + " fence (Leases.fenced) that has not committed; nothing changed: try again", e);
          }
          return whenBusy;
        }
        if (!runs.again(e, false)) { // one statement of idem's, no caller code: a lost race
          throw e;
        }
      }
    }
  }
}
