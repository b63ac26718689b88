package dev.idem.jdbc.nature;

import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Dialect;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.Identifiers;
import dev.idem.jdbc.internal.Rendered;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.tx.TxCallback;
import dev.idem.transition.Outcome;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jooq.Field;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * Rows of <b>your</b> table that exist once under a unique key, so inserting one is idempotent by
 * nature. Two uses, one statement ({@code INSERT … ON CONFLICT (key) DO NOTHING}):
 *
 * <ul>
 *   <li><b>Set membership</b>: a like is a member of a set; liking twice leaves one like.
 *   <li><b>A business key as the guard</b>: a unique {@code (order_id, step)} on the payments table
 *       is the idempotency key, with no key row beside it and no window: it lives as long as the
 *       payment does (the seed's first way out of the window problem). The rest of the effect runs
 *       in the same transaction, only when the row went in.
 * </ul>
 *
 * <pre>{@code
 * UniqueRows likes = idem.uniqueRows("likes").key("user_id", "post_id").build();
 * likes.insert(Map.of("user_id", "u1", "post_id", "p9"));             // APPLIED, then ALREADY_DONE
 *
 * UniqueRows payments = idem.uniqueRows("shop.payments").key("order_id", "step").build();
 * UniqueWrite<String> w = payments.insert(Map.of("order_id", "o1", "step", "charge", "amount", 4000),
 *     tx -> { ledger.debit(tx, "o1", 4000); return "debited"; });    // the debit runs once per (o1, charge)
 * }</pre>
 *
 * <h2>Guarantees</h2>
 *
 * <ul>
 *   <li>Of any number of copies racing on any number of connections, exactly one inserts the row
 *       and is told {@link Outcome#APPLIED}; the others are told {@link Outcome#ALREADY_DONE} and
 *       write nothing (the database's unique index decides). A repeat is never an error.
 *   <li>The key columns must carry a unique constraint (or primary key) on exactly these columns:
 *       otherwise PostgreSQL refuses the statement, and on MariaDB idem refuses the first call (it
 *       looks for the index), never a silent second row.
 *   <li>On MariaDB the statement is {@code INSERT … ON DUPLICATE KEY UPDATE} with an update that
 *       changes nothing, which records whether it inserted in the session variable {@code
 *       @idem_outcome}, read by a second statement. Unlike {@code DO NOTHING} it locks the row
 *       found until your transaction ends, so the copies told ALREADY_DONE wait for one another's
 *       commits. A duplicate on another unique index of the table is refused with {@link
 *       DataAccessException}, as on PostgreSQL, and writes nothing; so is a row that collides
 *       with one row on the key and with another on another unique index, if MariaDB meets the
 *       other index first (PostgreSQL reports the key's duplicate).
 *   <li>With an effect, the row and what the effect wrote commit together, or neither does.
 *   <li>Names are checked as plain identifiers and rendered quoted; values travel as binds.
 * </ul>
 *
 * <h2>Where it stops</h2>
 *
 * <ul>
 *   <li>ALREADY_DONE does not compare the other columns: a second insert with the same key and
 *       another amount is absorbed as a repeat. If that must be refused, compare them yourself, or
 *       use the executor, whose fingerprint refuses a key reused for another request.
 *   <li>Without a connection the call joins the transaction open on this thread or runs in one of
 *       its own (an effect that throws rolls the row back with it). With yours, it runs in your
 *       transaction and idem neither commits nor rolls back: if the effect throws, roll back.
 *   <li>The row is the memory: delete it and a repeat runs again.
 * </ul>
 *
 * <p>Thread-safe and immutable. The statement is rendered per call (its columns vary).
 */
public final class UniqueRows {
  private final Context idem;
  private final String tableName;
  private final Table<?> table;
  private final Columns key;
  /** On MariaDB (else null): the insert's form there, its read of the outcome, its check of the unique index. */
  private final OnDuplicateKey onDuplicate;
  private final Rendered outcomeOnMariaDb;

  private UniqueRows(Builder b, Columns key) {
    this.idem = b.idem;
    this.tableName = b.table;
    this.table = DSL.table(Identifiers.table(b.table));
    this.key = key;
    boolean mariadb = idem.mariadb(); // asked when built, as every tool does
    this.onDuplicate = mariadb ? new OnDuplicateKey(b.table, Identifiers.table(b.table), key) : null;
    this.outcomeOnMariaDb = mariadb ? onDuplicate.outcome(null) : null;
  }

  static {
    Factories.register(UniqueRows.class, String.class, Builder.class, Builder::new);
  }

  /**
   * Inserts {@code row} in your transaction on {@code tx}, unless a row with its key is there.
   *
   * @param row column name to value: every key column, and any others to set
   * @return {@link Outcome#APPLIED} or {@link Outcome#ALREADY_DONE}
   * @throws IllegalArgumentException if {@code tx} is null, in auto-commit mode or aborted, a column
   *     name is not a plain identifier, or a key column has no value; nothing is written
   */
  public Outcome insert(Connection tx, Map<String, ?> row) {
    idem.joined(tx, "the insert into " + tableName);
    check(row);
    return insertRow(tx, row);
  }

  /**
   * {@link #insert(Connection, Map)} in the transaction open on this thread ({@code
   * Idem.inTransaction}, or a framework's through the transaction binding), or in one of its own.
   */
  public Outcome insert(Map<String, ?> row) {
    check(row);
    return idem.inTransaction(tx -> insertRow(tx.connection(), row));
  }

  /**
   * Inserts {@code row}, and if it went in, runs {@code effect} in the same transaction: the row is
   * the guard of the effect. In the transaction open on this thread, or in one of its own (then a
   * serialization failure runs both again, within the retry budget).
   *
   * @return APPLIED with what {@code effect} returned, or ALREADY_DONE with null: the effect did not run
   * @throws X what {@code effect} threw; in a transaction of idem's own, the row is rolled back with it
   */
  public <T, X extends Exception> UniqueWrite<T> insert(Map<String, ?> row, TxCallback<T, X> effect) throws X {
    check(row);
    Require.notNull(effect, "effect");
    return idem.inTransaction(tx -> guarded(tx, row, effect));
  }

  /**
   * {@link #insert(Map, TxCallback)} in your transaction on {@code tx}. If {@code effect} throws,
   * the row is already written in your transaction: roll it back.
   */
  public <T, X extends Exception> UniqueWrite<T> insert(Connection tx, Map<String, ?> row, TxCallback<T, X> effect)
      throws X {
    Tx joined = idem.joined(tx, "the insert into " + tableName);
    check(row);
    Require.notNull(effect, "effect");
    return guarded(joined, row, effect);
  }

  private <T, X extends Exception> UniqueWrite<T> guarded(Tx tx, Map<String, ?> row, TxCallback<T, X> effect) throws X {
    if (insertRow(tx.connection(), row) == Outcome.ALREADY_DONE) {
      return new UniqueWriteValue<>(Outcome.ALREADY_DONE, null);
    }
    return new UniqueWriteValue<>(Outcome.APPLIED, effect.apply(tx));
  }

  private void check(Map<String, ?> row) {
    key.binds(row, tableName);
    row.keySet().forEach(c -> Identifiers.check("column in row", c));
  }

  /** The insert of {@code row}, already {@linkplain #check checked} by the caller before any transaction began. */
  private Outcome insertRow(Connection c, Map<String, ?> row) {
    List<Field<?>> columns = new ArrayList<>();
    List<Field<?>> values = new ArrayList<>();
    Map<String, Object> binds = new HashMap<>();
    int i = 0;
    for (Map.Entry<String, ?> e : row.entrySet()) {
      columns.add(DSL.field(DSL.name(e.getKey())));
      values.add(DSL.param("v" + i));
      binds.put("v" + i++, e.getValue());
    }
    try {
      if (onDuplicate != null) {
        // On a duplicate the first key column is set to itself: the row is locked and left as it was.
        Rendered insert = onDuplicate.insert(columns, values, key.fields.get(0), DSL.falseCondition());
        return onDuplicate.run(c, insert, outcomeOnMariaDb, binds).outcome() == OnDuplicateKey.INSERTED
            ? Outcome.APPLIED : Outcome.ALREADY_DONE;
      }
      var dsl = Rendered.userTables(Dialect.POSTGRES);
      Rendered insert = Rendered.render(Dialect.POSTGRES, dsl.insertInto(table, columns)
          .values(values).onConflict(key.fields).doNothing().returningResult(DSL.inline(1)));
      try (PreparedStatement ps = insert.prepare(c, binds); ResultSet rs = ps.executeQuery()) {
        return rs.next() ? Outcome.APPLIED : Outcome.ALREADY_DONE;
      }
    } catch (SQLException e) {
      throw new DataAccessException("insert into " + tableName + " failed: " + e.getMessage(), e);
    }
  }

  /** Configures {@link UniqueRows} on one table: the key columns are required. */
  public static final class Builder extends KeyedBuilder<Builder> {
    private Builder(Context idem, String table) {
      super(idem, table);
    }

    @Override
    Builder self() {
      return this;
    }

    /**
     * @throws IllegalArgumentException if the table or a key column is not a plain identifier, or
     *     the key is missing or names a column twice
     */
    public UniqueRows build() {
      Identifiers.table(table);
      return new UniqueRows(this, Columns.of("key", key));
    }
  }
}
