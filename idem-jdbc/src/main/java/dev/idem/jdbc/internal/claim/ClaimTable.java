package dev.idem.jdbc.internal.claim;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.param;
import static org.jooq.impl.DSL.selectOne;
import static org.jooq.impl.DSL.table;

import dev.idem.jdbc.internal.KeyTable;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Expiry;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.jooq.CommonTableExpression;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.InsertOnDuplicateStep;
import org.jooq.Query;
import org.jooq.Record;
import org.jooq.Record1;
import org.jooq.Select;
import org.jooq.SelectField;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The claim engine's SQL on one claim table, rendered once per guard by jOOQ and run as JDBC
 * prepared statements, each string a single round trip. Three layouts share it: the executor's key
 * table ({@link Layout#KEYS}: fingerprint, stored result, and the external effects' state, fence
 * and lease), the inbox ({@link Layout#INBOX}: the id and its times only) and the per-entity
 * sequences ({@link Layout#SEQUENCES}: a number per entity, a claim and a read only). Every time that
 * decides anything is the database's: {@code clock_timestamp()} where a statement may first wait
 * on a lock, {@code statement_timestamp()} where it cannot (a read, what a write stamps).
 */
public final class ClaimTable {

  /** Where a guard keeps its claims: table, primary key index and column names. */
  public record Layout(String table, String primaryKey, String scope, String key, String created, Kind kind) {
    /** The executor's key table. */
    public static final Layout KEYS = new Layout("idem_keys", "idem_keys_pkey", "scope", "key", "created_at", Kind.KEYS);
    /** The inbox: (consumer, message id) and when it was received. */
    public static final Layout INBOX = new Layout("idem_inbox", "idem_inbox_pkey", "consumer", "message_id", "received_at", Kind.INBOX);
    /** Per-entity sequences: (stream, entity) and the highest number applied; no times, no window. */
    public static final Layout SEQUENCES = new Layout("idem_sequences", "idem_sequences_pkey", "stream", "entity", null, Kind.SEQUENCES);

    /** The executor's key table: fingerprint, stored result, external effects' state, fence and lease. */
    public boolean keys() {
      return kind == Kind.KEYS;
    }
  }

  /**
   * What a claim on the table is. A key row ({@link #KEYS}, {@link #INBOX}) is claimed by inserting
   * it, and answers repeats within its window. A sequence row ({@link #SEQUENCES}) is claimed by
   * raising its number: a call claims it when its number is above the row's, and every other call
   * is a repeat, answered at once (no window: the row is kept forever).
   */
  public enum Kind { KEYS, INBOX, SEQUENCES }

  static final String IN_FLIGHT = KeyTable.IN_FLIGHT;
  static final String COMPLETED = KeyTable.COMPLETED;
  /** Name of the savepoint a joined call sets before its claim. */
  static final String SAVEPOINT = "idem_claim";
  /** What ends the string of a joined call that ran: its savepoint is released. */
  static final String RELEASE = "release savepoint " + SAVEPOINT;
  static final String ROLLBACK_TO_SAVEPOINT = "rollback to savepoint " + SAVEPOINT + ";\n" + RELEASE;

  /** The database clock now: what every comparison (lease over? window over?) reads. */
  private static final Field<OffsetDateTime> NOW = DbTime.clock();
  /**
   * The database clock when the statement started: what a write stamps, one value for every
   * column of the row (so {@code expires_at - created_at} is exactly the window).
   */
  private static final Field<OffsetDateTime> STAMP = DbTime.statementTime();
  /** Puts the caller's lock_timeout back, as a local claim saved it ({@link #bound}). */
  private static final String RESTORE = "set_config('lock_timeout', current_setting('idem.lock_timeout'), true)";

  final Layout layout;
  final Table<Record> t;
  final Field<String> scope;
  final Field<String> key;
  final Field<byte[]> fingerprint;
  final Field<String> state;
  final Field<Long> fence;
  final Field<OffsetDateTime> leaseExpiresAt;
  final Field<String> callKey;
  final Field<byte[]> result;
  final Field<OffsetDateTime> created;
  final Field<OffsetDateTime> completedAt;
  final Field<OffsetDateTime> expiresAt;
  /** idem's schema, where {@code idem_check_key} lives (functions are not mapped like tables). */
  private final String schema;
  /**
   * {@code idem_check_key(:key)}, the condition every claim writes its row under: always true in
   * the default layout; the partitioned layout refuses a key it cannot file (SQLSTATE IDEM2, see
   * docs/scale.md) before PostgreSQL looks for its partition.
   */
  private final Condition keyAccepted;
  private final Condition thisKey;
  /** The batch form of {@link #thisKey}: the rows of the scope's keys bound as the array {@code keys}. */
  private final Condition theseKeys;
  /**
   * A row that may be deleted or claimed for a new intent: past its window and, if an external
   * claim is still in flight, past its lease too, so a slow holder never sees its row taken (and
   * the fence restart) under it.
   */
  final Condition expirable;

  /**
   * Saves the caller's waits, bounds the claim's and turns statement_timeout off: the statement
   * before {@link #claimOrSignalPrefaced}, sent only where the session has a statement_timeout
   * (PostgreSQL arms it when a statement starts, so the claim cannot lift it for its own wait).
   */
  final Sql prelude;
  /**
   * The statements form's claim, with its effect to follow in the same round trip (the function
   * {@code idem_claim} of the migration): inserts the row under the wait bound and puts the
   * caller's lock_timeout back, or, if the key has a row, raises idem's signal (SQLSTATE IDEM1) so
   * that PostgreSQL skips what follows and rolls the round trip back having written nothing. Where
   * the session has a statement_timeout it raises the signal with the detail 'S' before it writes:
   * the claim is then sent again as {@link #claimOrSignalPrefaced}.
   */
  final Sql claimOrSignal;
  /** {@link #claimOrSignal} after the {@link #prelude}, which bounded the wait: puts both of the caller's settings back. */
  final Sql claimOrSignalPrefaced;
  /**
   * Claims the key under the wait bound, in one statement. On the key table and the inbox, an
   * insert that returns the claimed row if it inserted one, else no row: the row already there is
   * then read by {@link #restoreAndRead}. On sequences, one row always: the number raised, or the
   * repeat's row. The bound is set by the insert's one-time filter ({@link #bound}), before the
   * insert can wait, and the caller's lock_timeout is put back ({@link #RESTORE}) after the insert,
   * in the row it returns or by {@link #restoreAndRead}: so the caller's code, which runs after
   * the claim, waits as the caller set it to. Only lock_timeout is bounded: PostgreSQL arms
   * statement_timeout when a statement starts, so a pool's statement_timeout shorter than the wait
   * ends this statement first (57014, which the engine answers as a wait past the bound, in
   * flight).
   */
  final Sql claim;
  /**
   * After a {@link #claim} of the key table or the inbox that inserted nothing: puts the caller's
   * lock_timeout back and reads the key's row, in a statement of its own, so as of after the
   * claim's wait (a row another copy committed meanwhile is seen); exactly one row, all null if
   * the key has none. Null for sequences, whose claim always answers.
   */
  final Sql restoreAndRead;
  /** The key's row as a new statement sees it. */
  final Sql read;
  /**
   * The key's row as the latest committed state has it, in a transaction that may hold an older
   * snapshot: {@link #read} on PostgreSQL (whose claim statements fail with 40001 where the row
   * changed under the snapshot), a locking read on MariaDB (whose REPEATABLE READ would answer from
   * the snapshot).
   */
  final Sql readLatest;
  /** A re-claim of a row past its window, under the wait bound, as {@link #claim}: one row, 1 if re-claimed, else null. */
  final Sql reclaim;
  /** Stores a local effect's result (the key table only). */
  final Sql storeResult;

  /** External effects (the key table only): claims in flight with a lease, or reads; see the executor. */
  final Sql claimExternal;
  /** An external re-claim of a row past its window: a new life of the key, fence + 1. */
  final Sql reclaimExternal;
  /** Takes over an in-flight claim whose lease ended: fence + 1. */
  final Sql takeOver;
  /** External phase 3: records the result, fenced by the token. */
  final Sql complete;
  /** Ends a holder's lease at once (its call threw, or its record failed), fenced by the token. */
  final Sql endLease;
  final Sql fenceOf;

  /**
   * The inbox's batch claim ({@link BatchClaims}; null for the key table): every key of the array
   * {@code keys} claimed for {@code scope} in one statement, under the wait bound. A row for each
   * key it did not claim, in the shape {@link ClaimRow#from} reads, then the key's position
   * (1-based): the row already there, or all null where the insert waited for another copy's claim
   * that committed meanwhile (as {@link #claim}); no row for a key it claimed; and one row of
   * nulls (position null) when it claimed them all. The inserts go in key order, so batches that
   * share keys wait on each other in one order and never deadlock.
   */
  final Sql claimBatch;
  /** {@link #claimBatch} answering at once (1 ms) where another copy holds a key: after the bound ran out once. */
  final Sql claimBatchAtOnce;
  /** Re-claims the rows of {@code keys} past their window, under the wait bound: one row, the array of those re-claimed. */
  final Sql reclaimBatch;
  final Sql reclaimBatchAtOnce;
  /** Deletes the rows of {@code keys}: the claims of a batch's effects that failed, so redeliveries run them. */
  final Sql unclaimBatch;
  /** MariaDB's forms of the statements, whose batch statements are made per batch size; null on PostgreSQL. */
  final MariaDbClaimSql mariadb;
  /** An external claim's lease (the key table only; else null): how long a phase 3 left behind is worth finishing. */
  final Duration lease;

  /**
   * @param window how long a row answers repeats (null for sequences, which keep theirs forever)
   * @param lease an external claim's lease (the key table only; ignored otherwise)
   */
  public ClaimTable(Context context, Layout layout, Duration window, Duration inFlightWait, Duration lease) {
    this.schema = context.schema();
    this.layout = layout;
    this.lease = lease;
    String tableName = layout.table;
    this.t = table(name("idem", tableName));
    this.scope = column(tableName, layout.scope, String.class);
    this.key = column(tableName, layout.key, String.class);
    boolean sequences = layout.kind == Kind.SEQUENCES;
    this.created = sequences ? null : column(tableName, layout.created, OffsetDateTime.class);
    this.expiresAt = sequences ? null : column(tableName, "expires_at", OffsetDateTime.class);
    boolean keys = layout.keys();
    this.fingerprint = keys ? column(tableName, "fingerprint", byte[].class) : null;
    this.state = keys ? column(tableName, "state", String.class) : null;
    this.fence = keys ? column(tableName, "fence", Long.class) : null;
    this.leaseExpiresAt = keys ? column(tableName, "lease_expires_at", OffsetDateTime.class) : null;
    this.callKey = keys ? column(tableName, "call_key", String.class) : null;
    this.result = keys ? column(tableName, "result", byte[].class) : null;
    this.completedAt = keys ? column(tableName, "completed_at", OffsetDateTime.class) : null;
    this.keyAccepted = accepted(param("key", String.class));
    this.thisKey = keyIs(param("key", String.class));
    this.theseKeys = scope.eq(param("scope", String.class)).and(key.eq(DSL.any(KEYS)));
    this.expirable = sequences ? DSL.falseCondition()
        : keys ? expiresAt.le(NOW).and(state.eq(inline(COMPLETED)).or(leaseExpiresAt.le(NOW))) : expiresAt.le(NOW);

    DSLContext dsl = context.dsl();
    if (context.mariadb()) {
      // The same protocol in MariaDB's SQL; no claimOrSignal: the statements form's one round trip
      // is a compound statement there (MariaDbClaimSql.compoundClaim, sent by Claims).
      MariaDbClaimSql m = new MariaDbClaimSql(this, dsl, window, inFlightWait, lease);
      this.mariadb = m;
      this.prelude = this.claimOrSignal = this.claimOrSignalPrefaced = null;
      this.claim = m.claim;
      this.restoreAndRead = m.restoreAndRead;
      this.read = m.read;
      this.readLatest = m.restoreAndRead != null ? m.restoreAndRead : m.read;
      this.reclaim = m.reclaim;
      this.storeResult = keys ? Sql.of(dsl, dsl.update(t).set(result, param("result", byte[].class)).where(thisKey)) : null;
      this.claimExternal = m.claimExternal;
      this.reclaimExternal = m.reclaimExternal;
      this.takeOver = m.takeOver;
      this.complete = m.complete;
      this.endLease = m.endLease;
      this.fenceOf = keys ? Sql.of(dsl, dsl.select(fence).from(t).where(thisKey)) : null;
      this.claimBatch = this.claimBatchAtOnce = this.reclaimBatch = this.reclaimBatchAtOnce = this.unclaimBatch = null;
      return;
    }
    this.mariadb = null;
    this.prelude = boundedWait(dsl, inFlightWait);
    Condition bound = bound(inFlightWait);
    if (sequences) {
      // A callback's claim and read only: no statements form, no window to re-claim a row past.
      this.claim = Sql.of(dsl, restoring("raised", raise(dsl, bound), raisedOrRepeat(dsl, "raised")));
      this.read = Sql.of(dsl, dsl.select(repeatRow(STAMP)).from(t).where(thisKey).and(lastApplied().ge(SEQ)));
      this.readLatest = this.read;
      this.claimOrSignal = this.claimOrSignalPrefaced = this.reclaim = this.storeResult = this.restoreAndRead = null;
      this.claimExternal = this.reclaimExternal = this.takeOver = this.complete = this.endLease = this.fenceOf = null;
      this.claimBatch = this.claimBatchAtOnce = this.reclaimBatch = this.reclaimBatchAtOnce = this.unclaimBatch = null;
      return;
    }
    Field<OffsetDateTime> expires = plus(STAMP, window);
    this.claimOrSignal = claimOrSignal(dsl, window, inline(waitMillis(inFlightWait) + "ms"));
    this.claimOrSignalPrefaced = claimOrSignal(dsl, window, DSL.castNull(SQLDataType.CLOB));

    // A bare insert: the claim of a new key is the common case, and the shape that also returned the
    // row already there (a common table expression, a union and a left join) cost the server about
    // twice the insert's CPU on every new key. A key that has a row is read by restoreAndRead.
    List<SelectField<?>> returned = new ArrayList<>(claimedRow(inline(1L)));
    returned.add(field(RESTORE, String.class));
    this.claim = Sql.of(dsl, insert(dsl, expires, bound).onConflictDoNothing().returningResult(returned));
    this.restoreAndRead = Sql.of(dsl, restored(existing(dsl, DSL.noCondition(), NOW)));
    this.read = Sql.of(dsl, existing(dsl, DSL.noCondition(), STAMP));
    this.readLatest = this.read;
    var update = dsl.update(t).set(created, STAMP).set(expiresAt, expires);
    if (keys) {
      update = update.set(fingerprint, param("fingerprint", byte[].class))
          .set(state, inline(COMPLETED))
          // null stays null (a local row has no token); a row an external claim left is raised, so
          // a stale holder of it is told it was taken over
          .set(fence, fence.plus(inline(1L)))
          .set(leaseExpiresAt, inline((OffsetDateTime) null))
          .set(callKey, DSL.castNull(SQLDataType.CLOB))
          .set(result, inline((byte[]) null))
          .set(completedAt, inline((OffsetDateTime) null)); // a local row completes when it is created
    }
    this.reclaim = Sql.of(dsl, restoring("reclaimed",
        update.where(thisKey).and(expirable).and(bound).returningResult(inline(1L).as("fence")),
        dsl.select(field(name("reclaimed", "fence"), Long.class)).from(table(name("reclaimed")))));
    this.storeResult = keys
        ? Sql.of(dsl, dsl.update(t).set(result, param("result", byte[].class)).where(thisKey))
        : null;

    if (keys) {
      Field<OffsetDateTime> leaseEnds = plus(STAMP, lease);
      this.claimExternal = Sql.of(dsl, claimOrRead(dsl, dsl.insertInto(t)
          .columns(scope, key, fingerprint, state, fence, leaseExpiresAt, callKey, created, expiresAt)
          .select(DSL.select(param("scope", String.class), param("key", String.class), param("fingerprint", byte[].class),
              inline(IN_FLIGHT), fenceFloor().plus(inline(1L)), leaseEnds, param("call_key", String.class), STAMP,
              expires).where(keyAccepted)),
          DSL.function(name(context.schema(), "idem_fence_above_floor"), Long.class, fence)));
      this.reclaimExternal = Sql.of(dsl, dsl.update(t)
          .set(fingerprint, param("fingerprint", byte[].class))
          .set(state, inline(IN_FLIGHT))
          // above the floor too: the row may be a local effect's, made after an external row of the
          // key was deleted (expiry raised the floor before that delete, so before this statement)
          .set(fence, DSL.greatest(fence, fenceFloor()).plus(inline(1L)))
          .set(leaseExpiresAt, leaseEnds)
          .set(callKey, param("call_key", String.class))
          .set(result, inline((byte[]) null))
          .set(created, STAMP)
          .set(completedAt, inline((OffsetDateTime) null))
          .set(expiresAt, expires)
          .where(thisKey)
          .and(expirable)
          .returningResult(fence));
      this.takeOver = Sql.of(dsl, dsl.update(t)
          .set(fence, fence.plus(inline(1L)))
          .set(leaseExpiresAt, leaseEnds)
          .where(thisKey)
          .and(state.eq(inline(IN_FLIGHT)))
          .and(fence.eq(param("fence", Long.class)))
          .and(leaseExpiresAt.le(NOW))
          .returningResult(fence));
      this.complete = Sql.of(dsl, dsl.update(t)
          .set(state, inline(COMPLETED))
          .set(result, param("result", byte[].class))
          .set(completedAt, STAMP)
          .set(leaseExpiresAt, inline((OffsetDateTime) null))
          .where(thisKey)
          .and(state.eq(inline(IN_FLIGHT)))
          .and(fence.eq(param("fence", Long.class)))
          .returningResult(fence));
      this.endLease = Sql.of(dsl, dsl.update(t)
          .set(leaseExpiresAt, NOW)
          .where(thisKey)
          .and(state.eq(inline(IN_FLIGHT)))
          .and(fence.eq(param("fence", Long.class))));
      this.fenceOf = Sql.of(dsl, dsl.select(fence).from(t).where(thisKey));
    } else {
      this.claimExternal = this.reclaimExternal = this.takeOver = this.complete = this.endLease = this.fenceOf = null;
    }

    if (layout.kind == Kind.INBOX) {
      this.claimBatch = Sql.of(dsl, claimBatch(dsl, expires, bound));
      this.claimBatchAtOnce = Sql.of(dsl, claimBatch(dsl, expires, bound(Duration.ZERO)));
      this.reclaimBatch = Sql.of(dsl, reclaimBatch(dsl, expires, bound));
      this.reclaimBatchAtOnce = Sql.of(dsl, reclaimBatch(dsl, expires, bound(Duration.ZERO)));
      this.unclaimBatch = Sql.of(dsl, dsl.deleteFrom(t).where(theseKeys));
    } else {
      this.claimBatch = this.claimBatchAtOnce = this.reclaimBatch = this.reclaimBatchAtOnce = this.unclaimBatch = null;
    }
  }

  /**
   * {@code select idem_claim(<table>, ...)}: see {@link #claimOrSignal}. A function, so that the
   * row already there is read only when there is one, in a snapshot of its own: the statement that
   * inserted and, on a conflict, raised (a common table expression, a CASE and a sub-select of the
   * row) cost the server about a seventh more on every new key.
   */
  private Sql claimOrSignal(DSLContext dsl, Duration window, Field<String> wait) {
    Field<byte[]> requestFingerprint = layout.keys() ? param("fingerprint", byte[].class) : DSL.castNull(SQLDataType.BLOB);
    return Sql.of(dsl, dsl.select(DSL.function(name(schema, "idem_claim"), String.class, inline(layout.table()),
        param("scope", String.class), param("key", String.class), requestFingerprint, inline(DbTime.micros(window)), wait)));
  }

  /** lock_timeout in milliseconds for a wait: 0 means "wait forever" to PostgreSQL, a zero bound "answer at once". */
  private static long waitMillis(Duration wait) {
    return Math.max(1, wait.toMillis());
  }

  /** A sequence's number, bound as {@code seq}. */
  private static final Field<Long> SEQ = param("seq", Long.class);

  private Field<Long> lastApplied() {
    return column(layout.table, "last_applied", Long.class);
  }

  /**
   * A sequence's claim: raises the entity's number to {@code seq} if it is higher, returning a row
   * only then. A number at or below what this statement's snapshot sees is answered before the
   * upsert, which would lock the entity's row (a transaction id, a written lock, a flushed commit)
   * to change nothing: the number only grows, so what the snapshot shows is a floor. Anything else
   * goes to the upsert, which decides against the latest committed row, waiting (under {@code gate},
   * the bound) for a copy that holds it. The bound is the CASE's condition so that it is set before
   * the snapshot's answer is looked at: the restore that ends the statement must find it saved.
   */
  private Query raise(DSLContext dsl, Condition gate) {
    // the conflict target and its excluded row take bare column names
    Field<String> stream = field(name(layout.scope), String.class);
    Field<String> entity = field(name(layout.key), String.class);
    Field<Long> number = field(name("last_applied"), Long.class);
    Condition newer = DSL.notExists(selectOne().from(t).where(thisKey).and(lastApplied().ge(SEQ)));
    return dsl.insertInto(t, stream, entity, number)
        .select(DSL.select(param("scope", String.class), param("key", String.class), SEQ)
            .where(DSL.condition("case when {0} then {1} else false end", gate, newer)))
        .onConflict(stream, entity)
        .doUpdate()
        .set(number, DSL.excluded(number))
        .where(lastApplied().lt(DSL.excluded(number)))
        .returningResult(inline(1L).as("fence"));
  }

  /**
   * After {@link #raise} as the common table {@code raised}: claimed if it raised the number, else
   * the repeat's row. Never no row: a number not raised is at or below the latest committed one.
   */
  private Select<?> raisedOrRepeat(DSLContext dsl, String raised) {
    Table<Record> from = table(name(raised));
    return dsl.select(claimedRow(field(name(raised, "fence"), Long.class))).from(from)
        .unionAll(rows(dsl.select(repeatRow(NOW)).where(DSL.notExists(selectOne().from(from)))));
  }

  /**
   * A sequence's repeat in the shape {@link ClaimRow#from} reads: completed as of {@code now}, no
   * result, never past a window (its end is +Infinity seconds).
   */
  private static List<SelectField<?>> repeatRow(Field<OffsetDateTime> now) {
    return completedRow(inline(false), epochSeconds(now), field("'Infinity'::float8", Double.class), now);
  }

  /** The keys of a batch, bound as one text array. */
  private static final Field<String[]> KEYS = param("keys", SQLDataType.CLOB.array());

  /**
   * The row of key {@code k} of the bound scope. In the partitioned layout the key decides the
   * partition, so PostgreSQL reads the one partition a key can be in.
   */
  private Condition keyIs(Field<String> k) {
    return scope.eq(param("scope", String.class)).and(key.eq(k));
  }

  /** {@code idem_check_key(k)}: true, or the partitioned layout's refusal of a key it cannot file. */
  private Condition accepted(Field<String> k) {
    return DSL.condition(DSL.function(name(schema, "idem_check_key"), Boolean.class, k));
  }

  /**
   * {@link #claimBatch}: {@link #insert}'s row for each key of the array, where {@code gate} holds,
   * then the row of each key it did not insert, as {@link #existing} reads it. A claimed key costs
   * no look-up of its row (this statement's snapshot cannot see it: the look-up found nothing,
   * after a visit to the heap) and no row sent back: in a batch of new keys those were about a
   * sixth of the statement's server time and most of its result. The caller's lock_timeout is put
   * back in a sub-select evaluated once, on the one row there always is, which counts the insert's
   * rows, so after all of its waits.
   */
  private Query claimBatch(DSLContext dsl, Field<OffsetDateTime> expires, Condition gate) {
    Table<Record> input = table(name("input"));
    Field<String> inputKey = field(name("input", "key"), String.class);
    Field<Long> position = field(name("input", "ord"), Long.class);
    Field<String> claimedKey = field(name("claimed", layout.key), String.class);
    Query insert = dsl.insertInto(t).columns(scope, key, created, expiresAt)
        .select(DSL.select(param("scope", String.class), inputKey, STAMP, expires).from(input)
            .where(gate).and(accepted(inputKey)).orderBy(inputKey))
        .onConflictDoNothing().returningResult(key);
    List<SelectField<?>> fields = rowFields(DSL.when(key.isNotNull(), inline(false)), NOW);
    fields.add(position);
    Select<?> rows = dsl.select(fields).from(input)
        .leftJoin(t).on(keyIs(inputKey))
        .where(DSL.notExists(selectOne().from(table(name("claimed"))).where(claimedKey.eq(inputKey))));
    return DSL.resultQuery("with input (key, ord) as (select * from unnest({0}) with ordinality), claimed as ({1})"
        + " select r.*, (select " + RESTORE + " from (select count(*) from claimed) as done) from (select) as one"
        + " left join ({2}) as r on true", KEYS, insert, rows);
  }

  /** {@link #reclaimBatch}: one row whatever was re-claimed, so the caller's lock_timeout is always put back. */
  private Query reclaimBatch(DSLContext dsl, Field<OffsetDateTime> expires, Condition gate) {
    // a statement of its own: jOOQ's builders change in place, so the single re-claim's is not reused
    Query reclaim = dsl.update(t).set(created, STAMP).set(expiresAt, expires).where(theseKeys).and(expirable).and(gate)
        .returningResult(key);
    return DSL.resultQuery("with reclaimed as ({0}) select array_agg({1}), " + RESTORE + " from reclaimed",
        reclaim, field(name("reclaimed", layout.key)));
  }

  /**
   * Saves the caller's lock_timeout and statement_timeout, bounds the lock wait of what follows to
   * {@code wait} and turns statement_timeout off: the statement before {@link
   * #claimOrSignalPrefaced}, which restores them. set_config(..., true) lasts until the transaction
   * ends, so the caller's own settings are saved and restored around every claim: the caller's
   * statements, and the deferred checks its COMMIT runs, wait as the caller set them to.
   */
  private static Sql boundedWait(DSLContext dsl, Duration wait) {
    return Sql.of(dsl, DSL.resultQuery(
        "select set_config('lock_timeout', {0}, true), set_config('statement_timeout', '0', true) from"
            + " (select set_config('idem.lock_timeout', current_setting('lock_timeout'), true),"
            + " set_config('idem.statement_timeout', current_setting('statement_timeout'), true)) as saved",
        inline(waitMillis(wait) + "ms")));
  }

  /**
   * Claims the key by an insert under the primary key, or returns the row already there, in one
   * statement. Zero rows come back when the insert waited for another transaction's claim that
   * committed meanwhile: under READ COMMITTED this statement's snapshot cannot see that row, and
   * the caller re-reads it with {@link #read} (a new statement, a new snapshot).
   */
  private Select<?> claimOrRead(DSLContext dsl, InsertOnDuplicateStep<Record> insert, Field<Long> returned) {
    CommonTableExpression<Record1<Long>> inserted = name("inserted").as(
        insert.onConflictDoNothing().returningResult(returned.as("fence")));
    return dsl.with(inserted).select(claimedRow(inserted.field("fence", Long.class))).from(inserted)
        .unionAll(rows(existing(dsl, DSL.notExists(selectOne().from(inserted)), NOW)));
  }

  /** A null of the state column's type, PostgreSQL's one-byte "char" (see idem_keys.state in the migration V1__idem.sql). */
  private static final Field<String> STATE_NULL = field("cast(null as \"char\")", String.class);

  /**
   * The row of a claim that inserted it (the shape of {@link #existing}): claimed, its fence (1 for
   * a local claim, whose row has none), the time its row was written with (a local row's
   * completion, which a repeat is later answered with), the rest null.
   */
  private static List<SelectField<?>> claimedRow(Field<Long> insertedFence) {
    return List.of(inline(true).as("claimed"), insertedFence,
        DSL.castNull(SQLDataType.BLOB), STATE_NULL, DSL.castNull(SQLDataType.BLOB),
        epochSeconds(STAMP), DSL.castNull(SQLDataType.DOUBLE),
        DSL.castNull(SQLDataType.DOUBLE), DSL.castNull(SQLDataType.DOUBLE));
  }

  /**
   * A local claim's insert: the row completed (its transaction is the effect's), no result yet;
   * its one row is made only where {@code gate} holds (the claim's {@link #bound}, or none).
   */
  private InsertOnDuplicateStep<Record> insert(DSLContext dsl, Field<OffsetDateTime> expires, Condition gate) {
    if (!layout.keys()) {
      return dsl.insertInto(t).columns(scope, key, created, expiresAt)
          .select(DSL.select(param("scope", String.class), param("key", String.class), STAMP, expires).where(gate.and(keyAccepted)));
    }
    // no completed_at: a local row completes when it is created (see completedOrCreated); no fence:
    // its effect commits with the claim, so nothing is ever fenced by it
    return dsl.insertInto(t)
        .columns(scope, key, fingerprint, state, created, expiresAt)
        .select(DSL.select(param("scope", String.class), param("key", String.class),
            param("fingerprint", byte[].class), inline(COMPLETED), STAMP, expires).where(gate.and(keyAccepted)));
  }

  /**
   * Saves the caller's lock_timeout (in idem.lock_timeout) and bounds the lock wait to {@code
   * wait}, as a condition that is always true. An uncorrelated sub-select: PostgreSQL evaluates it
   * once, as a one-time filter on the row a claim writes (its InitPlan), so before the write can
   * wait on another copy's claim; PostgreSQL reads lock_timeout when a wait begins, so a value set
   * earlier in the same statement applies. The inner sub-select saves before the outer bounds:
   * one with a volatile function (set_config) in its select list is never merged into the outer one.
   */
  private static Condition bound(Duration wait) {
    return DSL.condition("(select set_config('lock_timeout', {0}, true) from (select set_config('idem.lock_timeout',"
        + " current_setting('lock_timeout'), true)) as saved) is not null", inline(waitMillis(wait) + "ms"));
  }

  /**
   * {@code with <cte> as (<write>) select r.*, <restore> from (select) as one left join (<rows>) as r on true}:
   * exactly one row, all null where {@code rows} has none, whose last column puts the caller's
   * lock_timeout back ({@link #RESTORE}). It is evaluated for the one row, which is only made once
   * {@code rows} has given its row or none, and every branch of {@code rows} reads the write: so
   * after the write (and its wait), on every path, and in the same statement. A statement that
   * could return no row would leave the bound in force for the caller's code (the key table's and
   * the inbox's {@link #claim} can, and is followed by {@link #restoreAndRead}, which puts it back).
   */
  private static Query restoring(String cte, Query write, Select<?> rows) {
    return DSL.resultQuery("with {0} as ({1}) {2}", name(cte), write, restored(rows));
  }

  /** {@code select r.*, <restore> from (select) as one left join (<rows>) as r on true}: see {@link #restoring}. */
  private static Query restored(Select<?> rows) {
    return DSL.resultQuery("select r.*, " + RESTORE + " from (select) as one left join ({0}) as r on true", rows);
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private static Select rows(Select<?> select) {
    return select; // the two layouts select the same nine columns; jOOQ cannot type a list of them
  }

  /** The row of the key, in the shape {@link ClaimRow#from} reads. */
  private Select<?> existing(DSLContext dsl, Condition also, Field<OffsetDateTime> now) {
    return dsl.select(rowFields(inline(false), now)).from(t).where(thisKey).and(also);
  }

  /** The nine columns {@link ClaimRow#from} reads, of this table's row, {@code claimed} first. */
  private List<SelectField<?>> rowFields(Field<Boolean> claimed, Field<OffsetDateTime> now) {
    // The row's times with the database's "now" beside them, as float8 epoch seconds: ClaimRow
    // turns them into microseconds, compares and subtracts them (every one a database time). Not
    // as timestamptz, because pgjdbc builds a TimestampUtils with its calendars for every result
    // set it decodes a timestamp from.
    if (!layout.keys()) {
      return completedRow(claimed, epochSeconds(created), epochSeconds(expiresAt), now);
    }
    List<SelectField<?>> fields = new ArrayList<>();
    fields.add(claimed.as("claimed"));
    fields.add(fence);
    fields.add(fingerprint);
    fields.add(state);
    fields.add(result);
    fields.add(epochSeconds(completedOrCreated()));
    fields.add(epochSeconds(leaseExpiresAt));
    fields.add(epochSeconds(expiresAt));
    fields.add(epochSeconds(now));
    return fields;
  }

  /**
   * The nine columns of a row that keeps no fingerprint, result or lease (an inbox id, a sequence's
   * repeat), {@code claimed} first: completed at {@code completed}, open until {@code expires}
   * (epoch seconds both). A list the caller may add to (a batch's key position).
   */
  private static List<SelectField<?>> completedRow(Field<Boolean> claimed, Field<Double> completed, Field<Double> expires,
      Field<OffsetDateTime> now) {
    List<SelectField<?>> fields = new ArrayList<>(List.of(claimed.as("claimed"), inline(0L), DSL.castNull(SQLDataType.BLOB),
        inline(COMPLETED), DSL.castNull(SQLDataType.BLOB), completed, DSL.castNull(SQLDataType.DOUBLE), expires));
    fields.add(epochSeconds(now));
    return fields;
  }

  /**
   * When the row's outcome was recorded: an external effect's completed_at, else created_at (a
   * local effect's row is written completed, in its effect's transaction, and keeps no completed_at:
   * 8 bytes less per key). Null for a row in flight.
   */
  private Field<OffsetDateTime> completedOrCreated() {
    return DSL.when(state.eq(inline(COMPLETED)), DSL.coalesce(completedAt, created));
  }

  /**
   * The fence floor ({@code idem_fence_floor}): at least every fence of every key row expiry has
   * deleted. A new external claim starts above it, so a key whose row was deleted never hands out a
   * fence a stale holder of the deleted row could still present. Read from the sequence, which is
   * not transactional: see the migration V1__idem.sql.
   */
  private Field<Long> fenceFloor() {
    return DSL.field("(select last_value from {0})", Long.class, DSL.name(schema, "idem_fence_floor"));
  }

  static Field<OffsetDateTime> plus(Field<OffsetDateTime> t, Duration d) {
    return DbTime.plusMicros(t, inline(DbTime.micros(d)));
  }

  /** {@code t} in seconds since the epoch, as float8 (PostgreSQL's date_part); see {@link ClaimRow#micros}. */
  static Field<Double> epochSeconds(Field<OffsetDateTime> t) {
    return field("date_part('epoch', {0})", Double.class, t);
  }

  private static <T> Field<T> column(String table, String column, Class<T> type) {
    return field(name("idem", table, column), type);
  }

  /**
   * Completed rows: the ones expiry may delete once past their window. An external effect's row in
   * flight past its lease is an unknown outcome, kept for the operator (see Operations).
   */
  public Condition completed() {
    return state.eq(inline(COMPLETED));
  }

  /** Rows of one scope (an inbox's consumer). */
  public Condition ofScope(String value) {
    return scope.eq(DSL.inline(value));
  }

  /** Runs {@code sql} and reads the row from its {@code index}-th result, or null if it has none. */
  static ClaimRow row(Connection c, Sql sql, int index, Function<String, Object> binds, long startedNanos) throws SQLException {
    return sql.run(c, binds, index, rs -> ClaimRow.from(rs, startedNanos, sql.oneByOne()));
  }

  /**
   * The row {@code read} (a table's {@code read}) returns on {@code c}, in auto-commit, as committed:
   * on MariaDB a row read at READ UNCOMMITTED (the read's tenth column names the session's level)
   * may be another transaction's uncommitted claim, so it is read again with the next transaction,
   * the read's own, at READ COMMITTED ({@code SET TRANSACTION} without SESSION sets only that one).
   * On PostgreSQL, whose READ UNCOMMITTED is READ COMMITTED, {@link #row}.
   */
  static ClaimRow committedRow(Connection c, Sql read, Function<String, Object> binds, long startedNanos, boolean mariadb)
      throws SQLException {
    if (!mariadb) {
      return row(c, read, 0, binds, startedNanos);
    }
    boolean[] dirty = {false};
    ClaimRow row = read.run(c, binds, 0, rs -> {
      ClaimRow r = ClaimRow.from(rs, startedNanos, true);
      dirty[0] = r != null && MariaDbClaimSql.READ_UNCOMMITTED.equals(rs.getString(10));
      return r;
    });
    if (!dirty[0]) {
      return row;
    }
    try (java.sql.Statement st = c.createStatement()) {
      st.execute("set transaction isolation level read committed");
    }
    return row(c, read, 0, binds, startedNanos);
  }

  /** Runs {@code sql} and returns the first long of its {@code index}-th result, or null if no row (or null). */
  static Long single(Connection c, Sql sql, int index, Function<String, Object> binds) throws SQLException {
    return sql.run(c, binds, index, rs -> {
      if (!rs.next()) {
        return null;
      }
      long value = rs.getLong(1);
      return rs.wasNull() ? null : value;
    });
  }

  /** Runs {@code sql}, ignoring what it returns. */
  static void run(Connection c, Sql sql, Function<String, Object> binds) throws SQLException {
    sql.run(c, binds, -1, rs -> null);
  }
}
