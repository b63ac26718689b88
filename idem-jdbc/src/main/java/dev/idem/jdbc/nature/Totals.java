package dev.idem.jdbc.nature;

import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Dialect;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.Identifiers;
import dev.idem.jdbc.internal.Rendered;
import dev.idem.transition.Outcome;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * An absolute total on one of <b>your</b> tables that never moves backwards: the seed's {@code
 * clicks:ad7:14:31 = 413} and {@code ZADD board GT 1250 player9}. A writer sends the whole total, not
 * a delta; the row keeps the larger of what it holds and what arrives.
 *
 * <pre>{@code
 * Totals clicks = idem.totals("ads.clicks_per_minute").key("ad_id", "minute").total("clicks").build();
 * clicks.record(Map.of("ad_id", "ad7", "minute", minute), 413);  // APPLIED
 * clicks.record(Map.of("ad_id", "ad7", "minute", minute), 413);  // ALREADY_DONE: a repeat
 * clicks.record(Map.of("ad_id", "ad7", "minute", minute), 400);  // ALREADY_DONE: an older total, replayed late
 * }</pre>
 *
 * <h2>Guarantees</h2>
 *
 * <ul>
 *   <li>One statement, {@code INSERT … ON CONFLICT (key) DO UPDATE SET total = excluded.total WHERE
 *       total IS NULL OR total < excluded.total}: the row holds the largest total ever recorded for
 *       its key, whatever the order, repeats and races of the writers (PostgreSQL locks the row and
 *       re-checks the condition on its newest version). A repeat changes no value; PostgreSQL
 *       still locks the row for the rest of the transaction (a transaction id, and a commit that
 *       flushes), as it does for every {@code ON CONFLICT … DO UPDATE} that finds a row.
 *   <li>The key columns must carry a unique constraint (or primary key), exactly these columns:
 *       otherwise PostgreSQL refuses the statement ("no unique or exclusion constraint matching the
 *       ON CONFLICT specification"), and on MariaDB idem refuses the first call (it looks for the
 *       index), never a silent second row.
 *   <li>On MariaDB the statement is {@code INSERT … ON DUPLICATE KEY UPDATE total =
 *       IF(total IS NULL OR total < VALUES(total), VALUES(total), total)}, which records whether
 *       it inserted, raised or kept in the session variable {@code @idem_outcome}, read with the
 *       total by a second statement. A duplicate locks the row exclusively before the condition
 *       reads it, so the racing writers apply one after another on the newest total, at every
 *       isolation level (no 40001 at REPEATABLE READ, where PostgreSQL gives one). A duplicate on
 *       another unique index of the table is refused with {@link DataAccessException}, as on
 *       PostgreSQL, and writes nothing.
 *   <li>Names are checked as plain identifiers when built and rendered quoted; values travel as binds.
 * </ul>
 *
 * <h2>Where it stops</h2>
 *
 * Only totals that only grow (a running count, a high score, a sum over a closed minute). A value
 * that may legitimately go down (a balance) is a state with a version: use {@code Transitions}.
 * Without a connection the call joins the transaction open on this thread or runs in one of its own;
 * with yours, it runs in your transaction and idem neither commits nor rolls back. Thread-safe.
 */
public final class Totals {
  private final Context idem;
  private final String tableName;
  private final Columns key;
  /**
   * The upsert, and the read after it: on PostgreSQL of the total, when the upsert changed no row;
   * on MariaDB of the upsert's outcome and the total.
   */
  private final Rendered upsert;
  private final Rendered read;
  /** On MariaDB (else null): the upsert's form there, and its check of the table's unique index. */
  private final OnDuplicateKey onDuplicate;

  private Totals(Builder b, Columns key, String total) {
    this.idem = b.idem;
    this.tableName = b.table;
    this.key = key;
    Name name = Identifiers.table(b.table);
    Table<?> target = DSL.table(name).as("target");
    Field<Long> column = DSL.field(DSL.name(total), Long.class);
    Field<Long> held = DSL.field(DSL.name("target", total), Long.class); // the existing row's
    List<Field<?>> columns = new ArrayList<>(key.fields);
    columns.add(column);
    List<Field<?>> values = new ArrayList<>();
    for (int i = 0; i < key.fields.size(); i++) {
      values.add(DSL.param("k" + i));
    }
    values.add(DSL.param("total", Long.class));
    if (idem.mariadb()) { // asked when built, as every tool does
      this.onDuplicate = new OnDuplicateKey(b.table, name, key);
      this.upsert = onDuplicate.insert(columns, values, column,
          column.isNull().or(column.lt(OnDuplicateKey.valueOf(column))));
      this.read = onDuplicate.outcome(column);
      return;
    }
    this.onDuplicate = null;
    DSLContext dsl = Rendered.userTables(Dialect.POSTGRES);
    this.upsert = Rendered.render(Dialect.POSTGRES, dsl.insertInto(target, columns).values(values)
        .onConflict(key.fields).doUpdate()
        .set(column, DSL.excluded(column))
        .where(held.isNull().or(held.lt(DSL.excluded(column))))
        .returning(column));
    this.read = Rendered.render(Dialect.POSTGRES, dsl.select(column).from(DSL.table(name)).where(key.match()));
  }

  static {
    Factories.register(Totals.class, String.class, Builder.class, Builder::new);
  }

  /**
   * Records {@code total} for the row with {@code key}, in your transaction on {@code tx}: inserts
   * the row, or raises its total to {@code total} if it held less.
   *
   * @param key a value for every key column (other entries are ignored)
   * @throws IllegalArgumentException if {@code tx} is null, in auto-commit mode or aborted, or a key
   *     column has no value; nothing is written
   */
  public TotalWrite record(Connection tx, Map<String, ?> key, long total) {
    idem.joined(tx, "the total on " + tableName);
    Map<String, Object> binds = this.key.binds(key, tableName);
    binds.put("total", total);
    try {
      if (onDuplicate != null) {
        OnDuplicateKey.Result r = onDuplicate.run(tx, upsert, read, binds);
        // A NULL total is raised by any total, so the stored value is never NULL after the statement.
        return new TotalWriteValue(r.outcome() == OnDuplicateKey.KEPT ? Outcome.ALREADY_DONE : Outcome.APPLIED,
            r.stored());
      }
      for (int round = 1; ; round++) {
        try (PreparedStatement ps = upsert.prepare(tx, binds); ResultSet rs = ps.executeQuery()) {
          if (rs.next()) {
            return new TotalWriteValue(Outcome.APPLIED, rs.getLong(1));
          }
        }
        // Zero rows: the row exists and holds as much or more. Read what it holds.
        try (PreparedStatement ps = read.prepare(tx, binds); ResultSet rs = ps.executeQuery()) {
          if (rs.next()) {
            return new TotalWriteValue(Outcome.ALREADY_DONE, rs.getLong(1));
          }
        }
        if (round == 3) { // deleted between the two statements, three times over
          throw new DataAccessException("the row of " + tableName + " with key " + key + " kept being deleted while"
              + " its total was recorded");
        }
      }
    } catch (SQLException e) {
      throw new DataAccessException("recording a total on " + tableName + " failed: " + e.getMessage(), e);
    }
  }

  /**
   * {@link #record(Connection, Map, long)} in the transaction open on this thread ({@code
   * Idem.inTransaction}, or a framework's through the transaction binding), or in one of its own.
   */
  public TotalWrite record(Map<String, ?> key, long total) {
    this.key.binds(key, tableName); // a bad key fails before a connection is taken
    return idem.inTransaction(tx -> record(tx.connection(), key, total));
  }

  /** Configures {@link Totals} on one table: the key columns and the total column are required. */
  public static final class Builder extends KeyedBuilder<Builder> {
    private String total;

    private Builder(Context idem, String table) {
      super(idem, table);
    }

    @Override
    Builder self() {
      return this;
    }

    /** The numeric column holding the total (bigint, integer or numeric). */
    public Builder total(String column) {
      this.total = column;
      return this;
    }

    /**
     * @throws IllegalArgumentException if the table or a column is not a plain identifier, the key
     *     is missing or names a column twice, or the total column is missing or is a key column
     */
    public Totals build() {
      Identifiers.table(table);
      Columns columns = Columns.of("key", key);
      Identifiers.check("total column", total);
      if (columns.names.contains(total)) {
        throw new IllegalArgumentException("the total column " + total + " must not be a key column");
      }
      return new Totals(this, columns, total);
    }
  }
}
