package dev.idem.jdbc.nature;

import dev.idem.jdbc.internal.Dialect;
import dev.idem.jdbc.internal.Rendered;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.jooq.Condition;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * The MariaDB form of {@code INSERT … ON CONFLICT (key) …} for {@link Totals} and {@link
 * UniqueRows}: an {@code INSERT … ON DUPLICATE KEY UPDATE} that records what it did, then a read of
 * that record.
 *
 * <p>MariaDB's affected-row count cannot tell an insert from a duplicate left as it was (both count
 * 1 on a connection that reports matched rows, the driver's default), and its ON DUPLICATE KEY
 * fires on a duplicate of <i>any</i> unique index, where PostgreSQL's ON CONFLICT names one. So the
 * statement records what it found in the session variable {@code @idem_outcome}: set to NULL while
 * the row's values are computed (before any duplicate is looked for), then, only on a duplicate,
 * to 2 if the row found does not carry the call's key (it collided on another unique index:
 * nothing is changed and the call throws, as PostgreSQL would), 1 if the column is raised, else 0.
 * The next statement of the session reads it. ({@code RETURNING @idem_outcome} would save that
 * round trip, but MariaDB 10.11 evaluates it before the update clause when the insert waited for a
 * lock.) On a duplicate InnoDB locks the row exclusively before the update clause reads it, so
 * racing callers queue on the row and each sees the one before it committed; no shared lock is
 * taken that two of them could then both want to upgrade (the deadlock of a plain INSERT whose
 * duplicate-key error is caught).
 *
 * <p>A unique index is what makes the row exist once; without one on exactly the key columns,
 * MariaDB would insert a second row where PostgreSQL refuses the statement. So the first call of
 * each tool looks for one in {@code information_schema}, and refuses with {@link
 * DataAccessException} if there is none.
 */
final class OnDuplicateKey {
  /** The statement's outcome when the row went in. */
  static final int INSERTED = -1;
  /** The outcome when a row with the key was there and kept its value. */
  static final int KEPT = 0;
  /** The outcome when a row with the key was there and its column was raised. */
  static final int RAISED = 1;
  private static final int OTHER_INDEX = 2;

  private final String tableName;
  private final Name table;
  private final Columns key;
  /** Whether the table's unique index on the key was found: looked for once, at the first call. */
  private volatile boolean indexFound;

  OnDuplicateKey(String tableName, Name table, Columns key) {
    this.tableName = tableName;
    this.table = table;
    this.key = key;
  }

  /** What one call did: its outcome and, if read, the stored value of the updated column. */
  record Result(int outcome, Long stored) {}

  /**
   * {@code INSERT INTO table (columns) VALUES (values) ON DUPLICATE KEY UPDATE updated =
   * IF(raise, VALUES(updated), updated)}, recording its outcome.
   *
   * @param values the values, one per column
   * @param raise on a duplicate with the key, whether {@code updated} takes the new value
   */
  Rendered insert(List<Field<?>> columns, List<Field<?>> values, Field<?> updated, Condition raise) {
    List<Field<?>> row = new ArrayList<>(values);
    // The reset rides on the first value: the row's values are computed before any duplicate is
    // looked for, so a value left in the variable by an earlier statement of the session never shows.
    row.set(0, DSL.field("if((@idem_outcome := null) is null, {0}, null)", values.get(0).getDataType(), values.get(0)));
    Condition sameKey = DSL.noCondition();
    for (Field<Object> k : key.fields) {
      // compared as the unique index compares them: by the column's collation
      sameKey = sameKey.and(k.isNotDistinctFrom(valueOf(k)));
    }
    Field<?> outcome = DSL.field("(@idem_outcome := case when not ({0}) then {1} when {2} then {3} else {4} end)",
        sameKey, DSL.inline(OTHER_INDEX), raise, DSL.inline(RAISED), DSL.inline(KEPT));
    return Rendered.render(Dialect.MARIADB, DSL.query(
        "insert into {0} ({1}) values ({2}) on duplicate key update {3} = if({4} = {5}, {6}, {3})",
        DSL.table(table), DSL.list(columns), DSL.list(row), updated, outcome, DSL.inline(RAISED), valueOf(updated)));
  }

  /**
   * The read of {@link #insert}'s outcome, and of {@code stored}'s value in the row with the key
   * (binds {@code k0}, {@code k1}, …) if not null: a locking read, of the row the insert locked.
   */
  Rendered outcome(Field<?> stored) {
    Field<Object> recorded = DSL.field("@idem_outcome");
    return Rendered.render(Dialect.MARIADB, stored == null
        ? DSL.select(recorded)
        : DSL.select(recorded, stored).from(DSL.table(table)).where(key.match()).forUpdate());
  }

  /** {@code VALUES(column)}: on a duplicate, the value the statement would have inserted. */
  static <T> Field<T> valueOf(Field<T> column) {
    return DSL.field("values({0})", column.getDataType(), column);
  }

  /**
   * Runs {@code insert} and then {@code outcome} (from {@link #insert} and {@link #outcome}) on
   * {@code c}, in the caller's transaction, after checking once that the table has a unique index
   * on the key.
   *
   * @throws DataAccessException if the table has no unique index on exactly the key columns, or the
   *     row collided with another row on another unique index (then nothing was written)
   */
  Result run(Connection c, Rendered insert, Rendered outcome, Map<String, Object> binds) throws SQLException {
    requireUniqueIndex(c);
    try (PreparedStatement ps = insert.prepare(c, binds)) {
      ps.executeUpdate();
    }
    try (PreparedStatement ps = outcome.prepare(c, binds); ResultSet rs = ps.executeQuery()) {
      // No row with the key after the insert: it neither inserted one nor met one, so it met
      // another unique index's duplicate (and recorded 2).
      int recorded = OTHER_INDEX;
      if (rs.next()) {
        long o = rs.getLong(1);
        recorded = rs.wasNull() ? INSERTED : (int) o;
      }
      if (recorded == OTHER_INDEX) {
        String message = "the row collides with another row of " + tableName + " on a unique index other than the"
            + " key " + key.names + ": nothing was written";
        throw new DataAccessException(message, new SQLException(message, "23000", 1062));
      }
      Long stored = null;
      if (rs.getMetaData().getColumnCount() == 2) {
        long v = rs.getLong(2);
        stored = rs.wasNull() ? null : v;
      }
      return new Result(recorded, stored);
    }
  }

  /**
   * Looks in {@code information_schema} for a unique index (or primary key) of the table on exactly
   * the key columns, whole (no prefix index), in any order: the index PostgreSQL's {@code ON
   * CONFLICT (key)} would have to find. Once found, never asked again.
   */
  private void requireUniqueIndex(Connection c) throws SQLException {
    if (indexFound) {
      return;
    }
    String[] parts = table.getName();
    String schema = parts.length == 2 ? parts[0] : null;
    String name = parts[parts.length - 1];
    Map<String, Set<String>> indexes = new HashMap<>();
    Set<String> prefixed = new HashSet<>();
    try (PreparedStatement ps = c.prepareStatement("select index_name, column_name, sub_part"
        + " from information_schema.statistics where table_schema = coalesce(?, database()) and table_name = ?"
        + " and non_unique = 0")) {
      ps.setString(1, schema);
      ps.setString(2, name);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          String index = rs.getString(1);
          // MariaDB's column names are case-insensitive
          indexes.computeIfAbsent(index, i -> new HashSet<>()).add(rs.getString(2).toLowerCase(Locale.ROOT));
          if (rs.getObject(3) != null) {
            prefixed.add(index);
          }
        }
      }
    }
    Set<String> wanted = new HashSet<>();
    key.names.forEach(n -> wanted.add(n.toLowerCase(Locale.ROOT)));
    boolean found = indexes.entrySet().stream()
        .anyMatch(e -> !prefixed.contains(e.getKey()) && e.getValue().equals(wanted));
    if (!found) {
      throw new DataAccessException("no unique index or primary key of " + tableName + " is on exactly the key"
          + " columns " + key.names + (indexes.isEmpty() ? " (it has none, or there is no such table)" : "")
          + ": without one a second row with the same key would go in. Add UNIQUE (" + String.join(", ", key.names)
          + "), or name the columns of an existing unique index as the key");
    }
    indexFound = true;
  }
}
