package dev.idem.jdbc.transition;

import dev.idem.fence.FencingToken;
import dev.idem.fence.StaleFenceException;
import dev.idem.internal.Events;
import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Dialect;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.Identifiers;
import dev.idem.jdbc.internal.OwnTransaction;
import dev.idem.jdbc.internal.Rendered;
import dev.idem.transition.Outcome;
import dev.idem.transition.StatePath;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import org.jooq.Condition;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Query;
import org.jooq.Table;
import org.jooq.UpdateConditionStep;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * Conditional writes on one of <b>your</b> tables: a state step that only moves a row from where the
 * step starts ({@link #advance}), an edit that only applies at the version it was read at ({@link
 * #updateAtVersion}), and writes that a worker holding an older fencing token cannot make ({@link
 * #advanceFenced}, {@link #writeFenced}).
 *
 * <pre>{@code
 * Transitions orders = idem.transitions("shop.orders")
 *     .idColumn("id").statusColumn("status").versionColumn("version")
 *     .path(StatePath.of("PLACED", "PACKED", "SHIPPED", "DELIVERED"))
 *     .build();
 * Outcome o = orders.advance("o1", "PLACED", "PACKED"); // APPLIED, ALREADY_DONE or CONFLICT
 * }</pre>
 *
 * <h2>Guarantees</h2>
 *
 * <ul>
 *   <li>A step is one {@code UPDATE … WHERE id = :id AND status = :from}: of any number of copies
 *       racing on any number of connections, exactly one matches the row; the others see zero rows.
 *   <li>Zero rows is told apart by a second statement that reads where the row is, classified by
 *       the {@link StatePath}: at or past the target is {@link Outcome#ALREADY_DONE} (a repeat, or a
 *       late copy of an old step: the row is left as it is, never moved back), anywhere else or no
 *       row is {@link Outcome#CONFLICT}. A conflict is never reported as success.
 *   <li>The version column, when configured, is bumped only by a write that matched, so it counts
 *       real changes; repeats leave it alone.
 *   <li>Table and column names are checked as plain identifiers when the builder is built and are
 *       always rendered quoted: no SQL can travel through a name. Values only travel as binds.
 * </ul>
 *
 * <h2>On MariaDB</h2>
 *
 * The same outcomes, from two statements where PostgreSQL has one: MariaDB has no {@code UPDATE …
 * RETURNING}, so the conditional UPDATE is followed by a locking read ({@code SELECT … FOR UPDATE})
 * of the row, which reports what the write left or classifies zero rows. InnoDB evaluates an
 * UPDATE's condition on the newest committed row after waiting for a racing writer, at every
 * isolation level, so a racing copy sees zero rows (never 40001) and its locking read sees the
 * winner's commit even under REPEATABLE READ. That read locks the row until your transaction ends,
 * also for a repeat or a conflict (PostgreSQL's plain read locks nothing). On a connection in
 * auto-commit mode the two run in
 * one transaction of their own, committed before the call returns. Strings are bound as strings
 * (MariaDB converts them for ENUM, UUID and number columns); names are quoted with backticks.
 *
 * <h2>Where it stops</h2>
 *
 * <ul>
 *   <li>The statements run on the connection you pass, in your transaction: idem neither commits
 *       nor rolls back. On PostgreSQL under REPEATABLE READ or SERIALIZABLE a racing copy gets a
 *       serialization failure (40001) instead of zero rows; call it without a connection (or inside
 *       {@code Idem.inTransaction}) to have it re-run within the retry budget.
 *   <li>The classification read is a separate statement: under READ COMMITTED it sees the row as
 *       committed when it runs, which may already be past what made the step match zero rows.
 *   <li>The id column must be unique (a primary key): a step that matches more than one row throws
 *       {@link IllegalStateException} after the UPDATE ran, and your transaction must roll back.
 *   <li>A state that can be left and re-entered is not a forward path; use {@link #updateAtVersion}.
 * </ul>
 *
 * <h2>Events</h2>
 *
 * With a listener on {@code Idem}, every call that returns an outcome emits one {@link
 * dev.idem.event.IdemEvent.Transition} with source {@code "transitions:<table>"}, carrying that
 * outcome, the step ({@code from → to}; none for an edit) and the row as the call left or found it:
 * count ALREADY_DONE as repeats caught on this hop, and watch CONFLICT. A write refused for a stale
 * fencing token emits {@link dev.idem.event.IdemEvent.StaleFence} before it throws. The event is
 * delivered when the outcome is decided, which is before <b>your</b> transaction ends: APPLIED
 * means "written in your transaction", counts only if you commit, and is emitted again when {@link
 * dev.idem.jdbc.Idem#inTransaction} re-runs the callback. A call that throws anything else emits nothing. With no
 * listener no event is built.
 *
 * <p>Thread-safe and immutable. The step statements are rendered once, in {@link Builder#build()},
 * for the database the DataSource is on (asked of the driver then, on the {@code Idem}'s first use);
 * an edit with a map of columns is rendered per call (its columns vary).
 */
public final class Transitions {
  private final String tableName;
  private final Table<?> table;
  private final String idColumn;
  private final String statusColumn;
  private final String versionColumn; // null: no version column
  private final String fenceColumn; // null: no fence column
  private final StatePath path;
  private final Events events;
  private final Field<Object> id;
  private final Field<String> status;
  private final Field<Long> version;
  private final Field<Long> fence;
  /** The database this {@code Idem}'s DataSource is on, told when built. */
  private final Dialect dialect;
  private final Rendered advance;
  private final Rendered advanceFenced; // null: no fence column
  /** The row's status, version and fence by id; on MariaDB a locking read. */
  private final Rendered read;
  private final Context idem;

  private Transitions(Builder b, Table<?> table) {
    this.idem = b.idem;
    this.tableName = b.table;
    this.table = table;
    this.idColumn = b.idColumn;
    this.statusColumn = b.statusColumn;
    this.versionColumn = b.versionColumn;
    this.fenceColumn = b.fenceColumn;
    this.path = b.path;
    this.events = Events.to(b.idem.listener(), "transitions:" + tableName);
    this.id = DSL.field(DSL.name(idColumn));
    this.status = DSL.field(DSL.name(statusColumn), String.class);
    this.version = versionColumn == null ? null : DSL.field(DSL.name(versionColumn), Long.class);
    this.fence = fenceColumn == null ? null : DSL.field(DSL.name(fenceColumn), Long.class);
    List<Field<?>> columns = new ArrayList<>(List.of(statusText()));
    if (version != null) {
      columns.add(version);
    }
    if (fence != null) {
      columns.add(fence);
    }
    // Asked when built, as every tool does, not at a first call that may already hold one of
    // the pool's connections.
    this.dialect = idem.dialect();
    this.advance = renderAdvance(false);
    this.advanceFenced = fence == null ? null : renderAdvance(true);
    var select = Rendered.userTables(dialect).select(columns).from(table).where(id.eq(DSL.param("id")));
    // On MariaDB the read that classifies zero rows (or reads back what the write left) must be a
    // locking one: under REPEATABLE READ a plain SELECT sees the transaction's snapshot, which may
    // predate the copy whose commit made the write match zero rows, where the UPDATE itself
    // (always a current read on InnoDB) saw that commit. A PostgreSQL transaction at that level
    // gets 40001 from the UPDATE instead, so its plain read never disagrees with the write.
    this.read = Rendered.render(dialect, dialect == Dialect.MARIADB ? select.forUpdate() : select);
  }

  static {
    Factories.register(Transitions.class, String.class, Builder.class, Builder::new);
  }

  /** The table, as configured. */
  String table() {
    return tableName;
  }

  /** The forward path that classifies zero rows. */
  StatePath path() {
    return path;
  }

  // ---------------------------------------------------------------- advance

  /**
   * Moves the row {@code id} from {@code from} to {@code to}, if it is at {@code from}; bumps the
   * version column if there is one. Same as {@code step(tx, id, from, to).outcome()}.
   *
   * @return {@link Outcome#APPLIED} if this call moved it, {@link Outcome#ALREADY_DONE} if the row is
   *     at or past {@code to}, {@link Outcome#CONFLICT} if it is anywhere else or missing
   * @throws IllegalArgumentException if an argument is missing, {@code from} equals {@code to}, or
   *     {@code to} comes before {@code from} on the path; nothing is written
   */
  public Outcome advance(Connection tx, Object id, String from, String to) {
    return step(tx, id, from, to).outcome();
  }

  /**
   * {@link #advance(Connection, Object, String, String)} in the transaction open on this thread ({@code
   * Idem.inTransaction}, or a framework's through the transaction binding), or in one of its own.
   */
  public Outcome advance(Object id, String from, String to) {
    return idem.inTransaction(tx -> advance(tx.connection(), id, from, to));
  }

  /**
   * {@link #advance(Connection, Object, String, String)}, also telling where the row is: its
   * status and version after the step (APPLIED) or as found by the read that classified zero rows.
   */
  public TransitionResult step(Connection tx, Object id, String from, String to) {
    checkStep(tx, id, from, to);
    Map<String, Object> binds = new HashMap<>();
    binds.put("to", to);
    binds.put("id", id);
    binds.put("from", from);
    return execute(tx, advance, binds, id, from, to, null);
  }

  /**
   * {@link #step(Connection, Object, String, String)} in the transaction open on this thread ({@code
   * Idem.inTransaction}, or a framework's through the transaction binding), or in one of its own.
   */
  public TransitionResult step(Object id, String from, String to) {
    return idem.inTransaction(tx -> step(tx.connection(), id, from, to));
  }

  /**
   * A fenced step: moves the row from {@code from} to {@code to} only if it is at {@code from} and
   * its fence column holds no token higher than {@code token} ({@code WHERE status = :from AND fence
   * <= :token}); records {@code token} in the fence column.
   *
   * @throws StaleFenceException if the row carries a higher token: this writer's lease ended and
   *     someone with a later grant wrote the row. Nothing was written.
   * @throws IllegalStateException if the builder was given no fence column
   */
  public TransitionResult advanceFenced(Connection tx, Object id, String from, String to, FencingToken token) {
    checkStep(tx, id, from, to);
    Require.notNull(token, "token");
    requireFence();
    Map<String, Object> binds = new HashMap<>();
    binds.put("to", to);
    binds.put("id", id);
    binds.put("from", from);
    binds.put("token", token.value());
    binds.put("token_guard", token.value());
    return execute(tx, advanceFenced, binds, id, from, to, token);
  }

  /**
   * {@link #advanceFenced(Connection, Object, String, String, FencingToken)} in the transaction open on this thread ({@code
   * Idem.inTransaction}, or a framework's through the transaction binding), or in one of its own.
   */
  public TransitionResult advanceFenced(Object id, String from, String to, FencingToken token) {
    return idem.inTransaction(tx -> advanceFenced(tx.connection(), id, from, to, token));
  }

  // ---------------------------------------------------------------- version and fenced writes

  /**
   * A read-modify-write edit: sets {@code values} (column name to value) and bumps the version,
   * only if the row is still at {@code expectedVersion} ({@code WHERE version = :v}).
   *
   * <p>Zero rows is always {@link Outcome#CONFLICT}, carrying the row's current version (or no row):
   * a version past the one expected cannot tell your own earlier write from someone else's, so
   * re-read, re-decide, and try again at the new version.
   *
   * @param values columns to set; not the id, status, version or fence column (move the status with
   *     {@link #advance}); names are checked as identifiers, values are bound
   * @throws IllegalStateException if the builder was given no version column
   */
  public TransitionResult updateAtVersion(Connection tx, Object id, long expectedVersion, Map<String, ?> values) {
    checkRow(tx, id);
    if (version == null) {
      throw new IllegalStateException("updateAtVersion needs a version column: configure versionColumn(..) on " + tableName);
    }
    Map<String, Object> binds = new HashMap<>();
    Map<Field<?>, Object> set = assignments(values, binds, false);
    set.put(version, version.plus(DSL.inline(1L)));
    binds.put("id", id);
    binds.put("expected_version", expectedVersion);
    Rendered st = write(Rendered.userTables(dialect).update(table).set(set)
        .where(this.id.eq(DSL.param("id")))
        .and(version.eq(DSL.param("expected_version", Long.class))));
    return execute(tx, st, binds, id, null, null, null);
  }

  /**
   * {@link #updateAtVersion(Connection, Object, long, Map)} in the transaction open on this thread ({@code
   * Idem.inTransaction}, or a framework's through the transaction binding), or in one of its own.
   */
  public TransitionResult updateAtVersion(Object id, long expectedVersion, Map<String, ?> values) {
    return idem.inTransaction(tx -> updateAtVersion(tx.connection(), id, expectedVersion, values));
  }

  /**
   * A fenced write, the seed's {@code UPDATE … SET result = :r, fence = :token WHERE id = :run AND
   * fence <= :token}: sets {@code values}, records {@code token} in the fence column and bumps the
   * version column if there is one. A row whose fence column is SQL NULL counts as fence 0.
   *
   * @param values columns to set, possibly none (then only the token is recorded); not the id,
   *     status, version or fence column
   * @return {@link Outcome#APPLIED}, or {@link Outcome#CONFLICT} when there is no row with the id
   * @throws StaleFenceException if the row carries a higher token; nothing was written
   * @throws IllegalStateException if the builder was given no fence column
   */
  public TransitionResult writeFenced(Connection tx, Object id, FencingToken token, Map<String, ?> values) {
    checkRow(tx, id);
    Require.notNull(token, "token");
    requireFence();
    Map<String, Object> binds = new HashMap<>();
    Map<Field<?>, Object> set = assignments(values, binds, true);
    set.put(fence, DSL.param("token", Long.class));
    if (version != null) {
      set.put(version, version.plus(DSL.inline(1L)));
    }
    binds.put("token", token.value());
    binds.put("id", id);
    binds.put("token_guard", token.value());
    Rendered st = write(Rendered.userTables(dialect).update(table).set(set)
        .where(this.id.eq(DSL.param("id")))
        .and(fenceAdmits()));
    return execute(tx, st, binds, id, null, null, token);
  }

  /**
   * {@link #writeFenced(Connection, Object, FencingToken, Map)} in the transaction open on this thread ({@code
   * Idem.inTransaction}, or a framework's through the transaction binding), or in one of its own.
   */
  public TransitionResult writeFenced(Object id, FencingToken token, Map<String, ?> values) {
    return idem.inTransaction(tx -> writeFenced(tx.connection(), id, token, values));
  }

  // ---------------------------------------------------------------- internals

  /**
   * A conditional UPDATE as this database runs it: on PostgreSQL returning the status and version
   * it left (one statement); on MariaDB, which has no UPDATE … RETURNING, a plain UPDATE whose
   * count says whether it matched, followed by {@link #read}.
   */
  private Rendered write(UpdateConditionStep<?> update) {
    Query q = dialect == Dialect.POSTGRES ? update.returning(returned()) : update;
    return Rendered.render(dialect, q);
  }

  private Rendered renderAdvance(boolean fenced) {
    Map<Field<?>, Object> set = new LinkedHashMap<>();
    set.put(status, DSL.param("to", String.class));
    if (fenced) {
      set.put(fence, DSL.param("token", Long.class));
    }
    if (version != null) {
      set.put(version, version.plus(DSL.inline(1L)));
    }
    var where = id.eq(DSL.param("id")).and(status.eq(DSL.param("from", String.class)));
    if (fenced) {
      where = where.and(fenceAdmits());
    }
    return write(Rendered.userTables(dialect).update(table).set(set).where(where));
  }

  /** {@code coalesce(fence, 0) <= :token}: a row never fenced admits every token. */
  private Condition fenceAdmits() {
    return DSL.coalesce(fence, DSL.inline(0L)).le(DSL.param("token_guard", Long.class));
  }

  private List<Field<?>> returned() {
    return version == null ? List.of(statusText()) : List.of(statusText(), version);
  }

  /**
   * The status as text, as it is read back: a {@code char(n)} column comes back blank-padded
   * ({@code "PACKED    "}), which matches no state of the path and would turn every repeat into a
   * CONFLICT; the cast to text drops the padding, and leaves text, varchar and enum values as they are.
   */
  private Field<String> statusText() {
    return status.cast(SQLDataType.CLOB);
  }

  /**
   * {@link #decide} and the event of what it decided, emitted once the statements are done: the
   * outcome, or a stale token's refusal just before its exception goes to the caller.
   */
  private TransitionResult execute(Connection c, Rendered update, Map<String, Object> binds, Object rowId,
      String from, String target, FencingToken token) {
    TransitionResult result;
    try {
      result = decide(c, update, binds, rowId, target, token);
    } catch (StaleFenceException stale) {
      events.staleFence(stale.resource(), stale.token(), stale.highest());
      throw stale;
    }
    events.transition(tableName, rowId, from, target, result.outcome(), result.rowFound(), result.state(),
        result.version());
    return result;
  }

  /**
   * Runs a conditional UPDATE; on zero rows, reads the row and classifies it. {@code target} null
   * means a write without a state step (zero rows is a conflict); {@code token} non-null means a
   * fenced write (a higher token on the row is a stale writer).
   */
  private TransitionResult decide(Connection c, Rendered update, Map<String, Object> binds, Object rowId,
      String target, FencingToken token) {
    try {
      if (dialect == Dialect.MARIADB) {
        // The write and the read of what it left are two statements there: on a connection in
        // auto-commit mode they run in one transaction of their own, so the row read back is the
        // one written (as RETURNING gives it on PostgreSQL), and both are committed when this returns.
        return c.getAutoCommit()
            ? OwnTransaction.on(c, own -> decideOnMariaDb(own, update, binds, rowId, target, token))
            : decideOnMariaDb(c, update, binds, rowId, target, token);
      }
      try (PreparedStatement ps = update.prepare(c, binds); ResultSet rs = ps.executeQuery()) {
        if (rs.next()) {
          TransitionResult applied = new TransitionResultValue(Outcome.APPLIED, true,
              Optional.ofNullable(rs.getString(1)), versionOf(rs, 2));
          if (rs.next()) {
            throw notUnique(rowId);
          }
          return applied;
        }
      }
      return classify(c, rowId, target, token, 0);
    } catch (SQLException e) {
      throw new DataAccessException("conditional write on " + tableName + " failed: " + e.getMessage(), e);
    }
  }

  /**
   * The UPDATE, then a locking read of the row: what the write left if it matched, else where the
   * row is. The UPDATE locks the row it matched (and, on InnoDB, evaluates its WHERE on the newest
   * committed version, after waiting for a racing writer), so of racing copies one matches and the
   * others find it moved, at every isolation level.
   */
  private TransitionResult decideOnMariaDb(Connection c, Rendered update, Map<String, Object> binds, Object rowId,
      String target, FencingToken token) throws SQLException {
    int matched;
    try (PreparedStatement ps = update.prepare(c, binds)) {
      matched = ps.executeUpdate();
    }
    if (matched > 1) {
      throw notUnique(rowId);
    }
    return classify(c, rowId, target, token, matched);
  }

  /**
   * Reads the row and tells the outcome: APPLIED with the row as the write left it when {@code
   * matched} is 1 (MariaDB only), else where the row is, classified by the path.
   */
  private TransitionResult classify(Connection c, Object rowId, String target, FencingToken token, int matched)
      throws SQLException {
    try (PreparedStatement ps = read.prepare(c, Map.of("id", rowId));
        ResultSet rs = ps.executeQuery()) {
      if (!rs.next()) {
        return new TransitionResultValue(Outcome.CONFLICT, false, Optional.empty(), OptionalLong.empty());
      }
      Optional<String> current = Optional.ofNullable(rs.getString(1));
      OptionalLong currentVersion = versionOf(rs, 2);
      if (matched == 1) {
        return new TransitionResultValue(Outcome.APPLIED, true, current, currentVersion);
      }
      if (token != null) {
        long highest = rs.getLong(version == null ? 2 : 3); // SQL NULL reads as 0, as in the guard
        if (highest > token.value()) {
          throw new StaleFenceException(tableName + "/" + rowId, token.value(), highest);
        }
        if (target == null && dialect == Dialect.MARIADB) {
          // A fenced write that matched the row and changed no value (same token, same values, no
          // version column) counts zero rows on a connection that reports changed rows
          // (useAffectedRows=true) instead of matched ones: the row, locked, admits the token.
          return new TransitionResultValue(Outcome.APPLIED, true, current, currentVersion);
        }
      }
      Outcome outcome = target == null ? Outcome.CONFLICT : path.classify(current.orElse(null), target);
      return new TransitionResultValue(outcome, true, current, currentVersion);
    }
  }

  private IllegalStateException notUnique(Object rowId) {
    return new IllegalStateException("the write matched more than one row of " + tableName + " with "
        + idColumn + " = " + rowId + ": the id column must be unique; roll the transaction back");
  }

  private OptionalLong versionOf(ResultSet rs, int column) throws SQLException {
    if (version == null) {
      return OptionalLong.empty();
    }
    long v = rs.getLong(column);
    return rs.wasNull() ? OptionalLong.empty() : OptionalLong.of(v);
  }

  private Map<Field<?>, Object> assignments(Map<String, ?> values, Map<String, Object> binds, boolean mayBeEmpty) {
    Require.notNull(values, "values");
    if (values.isEmpty() && !mayBeEmpty) {
      throw new IllegalArgumentException("values must name at least one column to set");
    }
    Map<Field<?>, Object> set = new LinkedHashMap<>();
    int i = 0;
    for (Map.Entry<String, ?> e : values.entrySet()) {
      String column = Identifiers.check("column in values", e.getKey());
      if (column.equals(idColumn) || column.equals(statusColumn) || column.equals(versionColumn)
          || column.equals(fenceColumn)) {
        throw new IllegalArgumentException("values must not set the " + column + " column: idem manages it"
            + (column.equals(statusColumn) ? " (move the status with advance)" : ""));
      }
      String param = "v" + i++;
      set.put(DSL.field(DSL.name(column)), DSL.param(param));
      binds.put(param, e.getValue());
    }
    return set;
  }

  private void checkStep(Connection tx, Object id, String from, String to) {
    checkRow(tx, id);
    Require.notBlank(from, "from");
    Require.notBlank(to, "to");
    if (from.equals(to)) {
      throw new IllegalArgumentException("from and to are both " + from + ": a step must change the status");
    }
    if (path.contains(from) && path.contains(to)
        && path.states().indexOf(to) < path.states().indexOf(from)) {
      throw new IllegalArgumentException("to " + to + " comes before from " + from + " on the path " + path
          + ": a step on a forward path cannot go back");
    }
  }

  private static void checkRow(Connection tx, Object id) {
    Require.notNull(tx, "tx");
    Require.notNull(id, "id");
  }

  private void requireFence() {
    if (fence == null) {
      throw new IllegalStateException("fenced writes need a fence column: configure fenceColumn(..) on " + tableName);
    }
  }

  /**
   * Configures {@link Transitions} on one table. Defaults: id column {@code id}, status column
   * {@code status}, no version column, no fence column; the path is required. Every name is
   * checked in {@link #build()}.
   */
  public static final class Builder {
    private final Context idem;
    private final String table;
    private String idColumn = "id";
    private String statusColumn = "status";
    private String versionColumn;
    private String fenceColumn;
    private StatePath path;

    private Builder(Context idem, String table) {
      this.idem = Require.notNull(idem, "idem");
      this.table = table;
    }

    /** The column that identifies a row; must be unique. Default {@code id}. */
    public Builder idColumn(String column) {
      this.idColumn = column;
      return this;
    }

    /** The column holding the state. Default {@code status}. */
    public Builder statusColumn(String column) {
      this.statusColumn = column;
      return this;
    }

    /** A numeric column bumped by every write that matched; null (the default) for none. */
    public Builder versionColumn(String column) {
      this.versionColumn = column;
      return this;
    }

    /**
     * A bigint column holding the highest fencing token that wrote the row, for {@link
     * Transitions#advanceFenced} and {@link Transitions#writeFenced}; null (the default) for none.
     */
    public Builder fenceColumn(String column) {
      this.fenceColumn = column;
      return this;
    }

    /** The forward path of the state machine in the status column. Required. */
    public Builder path(StatePath path) {
      this.path = path;
      return this;
    }

    /**
     * @throws IllegalArgumentException if the table or a column is not a plain identifier, two
     *     columns are the same, or the path is missing
     */
    public Transitions build() {
      Name name = Identifiers.table(table);
      Identifiers.check("idColumn", idColumn);
      Identifiers.check("statusColumn", statusColumn);
      if (versionColumn != null) {
        Identifiers.check("versionColumn", versionColumn);
      }
      if (fenceColumn != null) {
        Identifiers.check("fenceColumn", fenceColumn);
      }
      List<String> columns = new ArrayList<>(List.of(idColumn, statusColumn));
      if (versionColumn != null) {
        columns.add(versionColumn);
      }
      if (fenceColumn != null) {
        columns.add(fenceColumn);
      }
      if (columns.stream().distinct().count() != columns.size()) {
        throw new IllegalArgumentException("id, status, version and fence columns must differ, were " + columns);
      }
      Require.notNull(path, "path");
      return new Transitions(this, DSL.table(name));
    }
  }
}
