package dev.idem.jdbc.internal.claim;

import static dev.idem.jdbc.internal.claim.Sql.statement;

import dev.idem.jdbc.internal.DbTime;
import java.time.Duration;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.impl.DSL;

/**
 * The claim engine's statements on MariaDB, the same protocol as {@link ClaimTable}'s PostgreSQL
 * forms, in the SQL MariaDB has: no {@code ON CONFLICT}, no writable common table expressions, no
 * {@code UPDATE .. RETURNING}, no {@code set_config}. Each is a {@link Sql#part} whose statements go
 * one by one (but the statements form's {@link #compoundClaim}, one compound statement):
 *
 * <ul>
 *   <li>A claim is {@code INSERT IGNORE .. RETURNING}: a row back only if it inserted one. InnoDB
 *       checks the primary key with a locking read, so, as on PostgreSQL, an insert of a key
 *       another transaction has claimed and not yet committed waits for that transaction, then
 *       inserts (it rolled back) or inserts nothing (it committed).
 *   <li>Its wait is bounded per statement with {@code SET STATEMENT innodb_lock_wait_timeout = n,
 *       max_statement_time = 0 FOR ..}: the session's own settings are untouched, so the caller's
 *       statements wait as the caller set them to, and a session's statement time limit does not
 *       cut the claim's wait short with an error. MariaDB counts the bound in whole seconds: idem
 *       rounds the in-flight wait up.
 *   <li>The row a claim did not insert is read with a locking read ({@code LOCK IN SHARE MODE}):
 *       under REPEATABLE READ a plain read in the caller's transaction would see its snapshot, from
 *       before the row another copy committed while the claim waited.
 *   <li>An update that must say what it changed is followed by a read run only if it changed a row
 *       ({@link Sql.Statement#ifChanged}).
 *   <li>The auto-commit read that answers a likely repeat before any claim ({@link #read}) returns
 *       the session's isolation level too: at READ UNCOMMITTED (which PostgreSQL runs as READ
 *       COMMITTED) a plain read sees another copy's claim row before that copy commits, inserted
 *       completed and with no result yet, and would answer from it. Such a row is read again at
 *       READ COMMITTED.
 * </ul>
 *
 * Times are {@code DATETIME(6)} in UTC from {@link DbTime}. Not an API.
 */
final class MariaDbClaimSql {
  final Sql claim;
  final Sql restoreAndRead;
  final Sql read;
  final Sql reclaim;
  final Sql claimExternal;
  final Sql reclaimExternal;
  final Sql takeOver;
  final Sql complete;
  final Sql endLease;
  /**
   * The statements form's claim (the key table and the inbox; null for sequences): the head of one
   * compound statement, {@code BEGIN NOT ATOMIC .. END}, which the caller's statements and {@link
   * #COMPOUND_TAIL} follow, sent in one round trip on a connection in auto-commit. It begins its own
   * transaction, claims the key with the bounded {@code INSERT IGNORE} of {@link #claim}, and, only
   * if that inserted the row, runs the statements and commits; else it rolls back and returns the
   * key's row as {@link #read} does, its first column labelled {@link #KEY_ROW}. Whatever fails in
   * it is rolled back before the error reaches the caller ({@code RESIGNAL} passes the error on as
   * it was). It stops, having written nothing, with SQLSTATE IDEM1 and the message {@link
   * #KEY_BUSY} (the bounded wait for another copy's claim ran out) or {@link #TIMED_SESSION} (the
   * session has a {@code max_statement_time}, which would bound the whole statement, the claim's wait
   * included: the call takes the callback's way, as the guard's calls do from then on).
   */
  final Sql compoundClaim;

  private final DSLContext dsl;
  private final String t;
  /** The inbox's batch claim, per batch size: see {@link #claimBatch}. */
  private final String batchInsert;
  private final String batchInsertAtOnce;
  private final String batchRead;
  private final String unclaim;
  /** Counts the rows of keys of a scope that still have their claims' stamps: see {@link #claimsKept}. */
  private final String kept;
  /**
   * A claim's end in a transaction of idem's own, in one round trip: a compound statement that
   * finds the key's row stamped {@code :stamp} (the claim's) or signals 40001, else stores the
   * result ({@link #keptStoreAndCommit}, the key table) and commits. The row is gone if the server
   * rolled the transaction back under the effect (a deadlock whose error the effect caught; the
   * statements after it ran in a new transaction), and the signal keeps that from being committed
   * as the claimed work: idem rolls back and runs the call again.
   */
  final Sql keptAndCommit;
  final Sql keptStoreAndCommit;
  private final String stamp;
  private final String clock;

  MariaDbClaimSql(ClaimTable table, DSLContext dsl, Duration window, Duration inFlightWait, Duration lease) {
    this.dsl = dsl;
    this.t = dsl.render(table.t);
    this.stamp = dsl.render(DbTime.statementTime());
    this.clock = dsl.render(DbTime.clock());
    ClaimTable.Layout layout = table.layout;
    // max_statement_time = 0: a pool's statement time limit shorter than the bound would end the
    // claim with error 1969 while it waits; the claim waits its own bound instead, then answers in
    // flight, as PostgreSQL's claim does under a shorter statement_timeout.
    String bounded = "set statement innodb_lock_wait_timeout = " + waitSeconds(inFlightWait) + ", max_statement_time = 0 for ";
    String thisKey = name(layout.scope()) + " = :scope and " + name(layout.key()) + " = :key";

    if (layout.kind() == ClaimTable.Kind.SEQUENCES) {
      // A new entity is inserted; a known one is raised only if the number is higher; anything
      // else is a repeat, answered at once (a sequence keeps its rows forever: no window).
      String claimed = "select true, 1, null, null, null, " + epoch(stamp) + ", null, null, null";
      this.claim = Sql.part(
          // A repeat or a late number is answered from the committed number, taking no lock, as
          // PostgreSQL's claim (NOT EXISTS on its snapshot) does: the insert below would wait for a
          // copy of a newer number still running, which holds the entity's row. A number only
          // grows, so a snapshot that has it has the latest too. Not at READ UNCOMMITTED, whose
          // read would see a number another copy may still roll back: there the insert decides.
          statement(bounded + "select false, 0, null, 'C', null, " + epoch(clock) + ", null, 1e300, " + epoch(clock)
              + " from " + t + " where " + thisKey + " and last_applied >= :seq and " + ISOLATION + " <> '"
              + READ_UNCOMMITTED + "'"),
          statement(bounded + "insert ignore into " + t + " (" + name(layout.scope()) + ", " + name(layout.key())
              + ", last_applied) values (:scope, :key, :seq) returning true, 1, null, null, null, " + epoch(stamp)
              + ", null, null, null"),
          statement(bounded + "update " + t + " set last_applied = :seq where " + thisKey + " and last_applied < :seq"),
          statement(claimed).ifChanged(),
          // a repeat: completed now, never past a window (1e300 seconds stands for PostgreSQL's Infinity)
          statement("select false, 0, null, 'C', null, " + epoch(clock) + ", null, 1e300, " + epoch(clock)));
      this.read = Sql.part(statement("select false, 0, null, 'C', null, " + epoch(stamp) + ", null, 1e300, "
          + epoch(stamp) + ", " + ISOLATION + " from " + t + " where " + thisKey + " and last_applied >= :seq"));
      this.restoreAndRead = this.reclaim = null;
      this.claimExternal = this.reclaimExternal = this.takeOver = this.complete = this.endLease = null;
      this.batchInsert = this.batchInsertAtOnce = this.batchRead = this.unclaim = this.kept = null;
      this.compoundClaim = this.keptAndCommit = this.keptStoreAndCommit = null;
      return;
    }

    String expires = plus(stamp, window);
    boolean keys = layout.keys();
    String scopeName = name(layout.scope());
    String keyName = name(layout.key());
    // The times of a key's row go back as they are stored, UTC DATETIME(6), and ClaimRow reads
    // them without a zone (DbTime.read): converting each to epoch seconds in SQL made the read that
    // answers a cold repeat cost the server about a third of a primary-key read more.
    String rowColumns = keys
        ? "false, fence, fingerprint, state, result, case when state = 'C' then coalesce(completed_at, created_at) end"
            + ", lease_expires_at, expires_at"
        : "false, 0, null, 'C', null, " + name(layout.created()) + ", null, expires_at";
    String claimedRow = "true, 1, null, null, null, " + name(layout.created()) + ", null, null, null";
    String claimInsert = keys
        ? bounded + "insert ignore into " + t + " (scope, `key`, fingerprint, state, created_at, expires_at)"
            + " values (:scope, :key, :fingerprint, 'C', " + stamp + ", " + expires + ")"
        : bounded + "insert ignore into " + t + " (" + name(layout.scope()) + ", " + name(layout.key()) + ", "
            + name(layout.created()) + ", expires_at) values (:scope, :key, " + stamp + ", " + expires + ")";
    this.claim = Sql.part(statement(claimInsert + " returning " + claimedRow));
    // Declarations first (variables, then handlers), as a compound statement requires. The exit
    // handler rolls back whatever the statement did and passes the error on unchanged; the inner
    // block's handler tells the claim's lock wait past the bound (1205) from one of the caller's
    // statements, whose own 1205 is the caller's failure, not another copy in flight.
    this.compoundClaim = Sql.part(statement("begin not atomic\n"
        + "declare claimed int default 0;\n"
        + "declare exit handler for sqlexception begin rollback; resignal; end;\n"
        + "if @@session.max_statement_time <> 0 then " + signal(TIMED_SESSION) + "; end if;\n"
        + "start transaction;\n"
        + "begin\n"
        + "declare exit handler for 1205 " + signal(KEY_BUSY) + ";\n"
        + claimInsert + ";\n"
        + "set claimed = row_count();\n"
        + "end;\n"
        + "if claimed = 0 then\n"
        + "rollback;\n"
        // the key's row, as committed (the transaction is over: a statement of its own, a new
        // snapshot), in the read's shape: answered without a second round trip and without an error
        + "select false as " + KEY_ROW + rowColumns.substring("false".length()) + ", " + stamp + ", " + ISOLATION + " from " + t
        + " where " + thisKey + ";\n"
        + "else\n"
        + "do 0")); // the caller's statements follow, each after a semicolon, then COMPOUND_TAIL
    this.restoreAndRead = Sql.part(statement("select " + rowColumns + ", " + clock + " from " + t + " where " + thisKey
        + " lock in share mode"));
    this.read = Sql.part(statement("select " + rowColumns + ", " + stamp + ", " + ISOLATION + " from " + t
        + " where " + thisKey));
    String expirable = keys
        ? "expires_at <= " + clock + " and (state = 'C' or lease_expires_at <= " + clock + ")"
        : "expires_at <= " + clock;
    this.reclaim = Sql.part(
        statement(bounded + "update " + t + " set " + name(layout.created()) + " = " + stamp + ", expires_at = " + expires
            + (keys ? ", fingerprint = :fingerprint, state = 'C', fence = fence + 1, lease_expires_at = null,"
                + " call_key = null, result = null, completed_at = null" : "")
            + " where " + thisKey + " and " + expirable),
        // the stamp the row now has: the re-claim's, which the commit finds it by (keptAndCommit)
        statement("select " + name(layout.created()) + " from " + t + " where " + thisKey).ifChanged());

    this.kept = "select count(*) from " + t + " where " + scopeName + " = ? and (" + keyName + ", "
        + name(layout.created()) + ") in ({(?, ?)})";
    String keptOrSignal = "begin not atomic\n"
        + "if (select count(*) from " + t + " where " + thisKey + " and " + name(layout.created()) + " = :stamp) = 0 then "
        + "signal sqlstate '" + dev.idem.jdbc.internal.SqlStates.SERIALIZATION_FAILURE + "' set message_text = '"
        + CLAIM_GONE + "'; end if;\n";
    this.keptAndCommit = Sql.part(statement(keptOrSignal + "commit;\nend"));
    this.keptStoreAndCommit = keys
        ? Sql.part(statement(keptOrSignal + "update " + t + " set result = :result where " + thisKey + ";\ncommit;\nend"))
        : null;

    if (!keys) {
      this.claimExternal = this.reclaimExternal = this.takeOver = this.complete = this.endLease = null;
      // the batch's statements, each key a (?, ?, ...) row or a ? in a list: see claimBatch
      String insert = "insert ignore into " + t + " (" + scopeName + ", " + keyName + ", " + name(layout.created())
          + ", expires_at) values {rows} returning " + keyName + ", " + name(layout.created());
      String row = "(?, ?, " + stamp + ", " + expires + ")";
      this.batchInsert = bounded + insert.replace("{rows}", "{" + row + "}");
      this.batchInsertAtOnce = "set statement innodb_lock_wait_timeout = 0, max_statement_time = 0 for "
          + insert.replace("{rows}", "{" + row + "}");
      this.batchRead = "select " + rowColumns + ", " + clock + ", " + keyName + " from " + t + " where " + scopeName
          + " = ? and " + keyName + " in ({?}) lock in share mode";
      this.unclaim = "delete from " + t + " where " + scopeName + " = ? and " + keyName + " in ({?})";
      return;
    }
    this.batchInsert = this.batchInsertAtOnce = this.batchRead = this.unclaim = null;
    String leaseEnds = plus(stamp, lease);
    // The fence floor read with a locking read in the claim's own statement: expiry raises it
    // (idem_fence_floor) in a transaction that commits before its delete does, so a claim that
    // inserts where expiry deleted a row reads the raised floor, or holds expiry's raise off until
    // it has inserted.
    String floor = dsl.render(DSL.table(DSL.name("idem", "idem_fence_floor")));
    this.claimExternal = Sql.part(
        statement("insert ignore into " + t + " (scope, `key`, fingerprint, state, fence, lease_expires_at, call_key,"
            + " created_at, expires_at) select :scope, :key, :fingerprint, 'I', f.floor + 1, " + leaseEnds + ", :call_key, "
            + stamp + ", " + expires + " from " + floor + " f where f.id = 1 lock in share mode returning true, fence,"
            + " null, null, null, created_at, null, null, null"),
        statement("select " + rowColumns + ", " + clock + " from " + t + " where " + thisKey));
    String fenceOfKey = "select fence from " + t + " where " + thisKey;
    this.reclaimExternal = Sql.part(
        statement("update " + t + " set fingerprint = :fingerprint, state = 'I', fence = greatest(coalesce(fence, 0),"
            + " (select floor from " + floor + " where id = 1)) + 1, lease_expires_at = " + leaseEnds
            + ", call_key = :call_key, result = null, created_at = " + stamp + ", completed_at = null, expires_at = "
            + expires + " where " + thisKey + " and " + expirable),
        statement(fenceOfKey).ifChanged());
    this.takeOver = Sql.part(
        statement("update " + t + " set fence = fence + 1, lease_expires_at = " + leaseEnds + " where " + thisKey
            + " and state = 'I' and fence = :fence and lease_expires_at <= " + clock),
        statement(fenceOfKey).ifChanged());
    this.complete = Sql.part(
        statement("update " + t + " set state = 'C', result = :result, completed_at = " + stamp
            + ", lease_expires_at = null where " + thisKey + " and state = 'I' and fence = :fence"),
        statement("select :fence").ifChanged());
    this.endLease = Sql.part(statement("update " + t + " set lease_expires_at = " + clock + " where " + thisKey
        + " and state = 'I' and fence = :fence"));
  }

  /**
   * The inbox's batch claim of {@code n} keys (MariaDB has no arrays to bind a batch as one
   * value): an {@code INSERT IGNORE} of a row per key, {@code (?, ?, ...)} with the scope and the
   * key bound, returning the keys it inserted and their time; under the in-flight bound, or
   * answering at once. The keys go in the order given: the caller sorts them, so batches that share
   * keys lock them in one order.
   */
  String claimBatch(int n, boolean atOnce) {
    return atOnce ? repeated(batchInsertAtOnce, n, ", ") : claimBatches.of(batchInsert, n);
  }

  /** The rows of {@code n} keys of a scope (bound: the scope, then the keys), locked in share mode, the key tenth. */
  String readBatch(int n) {
    return repeated(batchRead, n, ", ");
  }

  /**
   * How many of {@code n} keys of a scope have a row with the stamp each claim gave it (bound: the
   * scope, then each key and its stamp as UTC): in the transaction that claimed them, all of them,
   * unless the server rolled it back under the effect (a deadlock whose error the effect caught),
   * when the rows are gone, or another copy's since, with a stamp of its own.
   */
  String claimsKept(int n) {
    return repeated(kept, n, ", ");
  }

  /** Deletes the rows of {@code n} keys of a scope (bound: the scope, then the keys). */
  String unclaimBatch(int n) {
    return repeated(unclaim, n, ", ");
  }

  /**
   * The batch claim under the bound, per batch size, rendered once: a consumer's polls come in a
   * few sizes (the poll's maximum, and what was left), and the statement of 500 keys is a
   * 20-kilobyte string that cost a StringBuilder's worth of copying on every batch.
   */
  private final Rendered claimBatches = new Rendered();

  /** A template rendered per batch size ({@link #repeated}): the first {@value #SIZES} sizes kept, any other rendered each time. */
  private static final class Rendered {
    static final int SIZES = 64;
    private final java.util.concurrent.ConcurrentHashMap<Integer, String> bySize = new java.util.concurrent.ConcurrentHashMap<>();

    String of(String template, int n) {
      String sql = bySize.get(n);
      if (sql == null) {
        sql = repeated(template, n, ", ");
        if (bySize.size() < SIZES) {
          bySize.putIfAbsent(n, sql);
        }
      }
      return sql;
    }
  }

  /** {@code template} with its one {@code {...}} written {@code n} times, joined by {@code separator}. */
  private static String repeated(String template, int n, String separator) {
    int open = template.indexOf('{');
    int close = template.indexOf('}', open);
    String unit = template.substring(open + 1, close);
    return template.substring(0, open) + String.join(separator, java.util.Collections.nCopies(n, unit))
        + template.substring(close + 1);
  }

  /** {@link #keptAndCommit}'s signal: the claim's row is gone. */
  static final String CLAIM_GONE = "idem: the claim is gone from this transaction";

  /** What ends {@link #compoundClaim}'s statement: the caller's statements come before it. */
  static final String COMPOUND_TAIL = "commit;\nend if;\nend";
  /**
   * The label of the first column of the row {@link #compoundClaim} returns when the key has one
   * (the caller's statements, which then do not run, may return rows of their own otherwise).
   */
  static final String KEY_ROW = "idem_key_row";
  /** {@link #compoundClaim} waited its bound for another copy's claim of the key: in flight. */
  static final String KEY_BUSY = "idem: another copy holds the key";
  /**
   * ER_SP_BADSTATEMENT: one of the caller's statements is one MariaDB allows in no stored program
   * or compound statement ({@code LOCK TABLES}, {@code LOAD DATA}, ...), refused as the statement
   * is parsed, before anything runs: such a call takes the callback's way.
   */
  static final int NOT_IN_COMPOUND = 1314;
  /** {@link #compoundClaim} found a session max_statement_time: see there. */
  static final String TIMED_SESSION = "idem: the session has a max_statement_time";

  private static String signal(String message) {
    return "signal sqlstate '" + dev.idem.jdbc.internal.SqlStates.REPEAT + "' set message_text = '" + message + "'";
  }

  /** Which of {@link #compoundClaim}'s stops {@code e} is, or null if it is none of them. */
  static String compoundStop(java.sql.SQLException e) {
    if (!dev.idem.jdbc.internal.SqlStates.REPEAT.equals(e.getSQLState()) || e.getMessage() == null) {
      return null;
    }
    for (String stop : new String[] {KEY_BUSY, TIMED_SESSION}) {
      if (e.getMessage().endsWith(stop)) {
        return stop;
      }
    }
    return null;
  }

  /** A column name as MariaDB quotes it. */
  private String name(String column) {
    return dsl.render(DSL.name(column));
  }

  private String epoch(String time) {
    return dsl.render(DbTime.epochSeconds(DSL.field(time)));
  }

  private String plus(String time, Duration d) {
    Field<java.time.OffsetDateTime> t = DSL.field(time, java.time.OffsetDateTime.class);
    return dsl.render(DbTime.plusMicros(t, DSL.inline(DbTime.micros(d))));
  }

  /**
   * The session's isolation level, the tenth column of {@link #read}: at READ UNCOMMITTED a plain
   * read sees rows other transactions have not committed, so a row read there is read again
   * ({@link ClaimTable#committedRow}).
   */
  static final String ISOLATION = "@@session.tx_isolation";

  /** {@link #ISOLATION}'s value at READ UNCOMMITTED. */
  static final String READ_UNCOMMITTED = "READ-UNCOMMITTED";

  /**
   * innodb_lock_wait_timeout for a wait: whole seconds, rounded up; 0 answers at once, as a zero
   * bound asks.
   */
  static long waitSeconds(Duration wait) {
    long millis = wait.toMillis();
    return millis <= 0 ? 0 : (millis + 999) / 1000;
  }
}
