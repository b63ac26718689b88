package dev.idem.jdbc.reconcile;

import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.KeyTable;
import dev.idem.jdbc.ops.Operations;
import dev.idem.jdbc.ops.StuckKey;
import dev.idem.jdbc.ops.UnknownOutcomes;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * Reconciliation: effects per intent, counted from the source of truth (the service's own effect
 * table) and compared with idem's keys; the one check that catches what every guard missed (an
 * effect written outside the executor, a key that completed while its effect rolled back
 * elsewhere, a call whose outcome nobody resolved). Run it daily. Built by {@code
 * Idem.reconciliation()}.
 *
 * <p>{@link #check} reads, in one REPEATABLE READ, READ ONLY transaction of its own (one snapshot,
 * never the caller's transaction): intents with more than one effect, effects with no key, idem's
 * completed keys of the scope with no effect, and the unknown outcomes (the operator's own query,
 * {@link Operations#unknownOutcomes}). The table and column names are checked and rendered quoted
 * by jOOQ, never concatenated. {@link #record} writes what was found into {@code idem_breaks}.
 *
 * <p>The same on PostgreSQL and MariaDB. On MariaDB keys are compared exactly, as on PostgreSQL
 * (case and trailing spaces count, whatever the effect column's collation), and an effect with no
 * key is named by its primary key, so the effect table needs one there (a table without one is
 * refused, naming it).
 *
 * <p>Not guaranteed: a key that completed after the snapshot, or an effect committed after it, is
 * judged at the next run; the checks scan the effect table and the key table (run it off-peak or
 * on a replica of both). Keys without effect are judged within the key window only: idem forgets
 * keys past it.
 */
public final class Reconciliation {
  // Qualified: the effect table the checks read beside it may have columns of the same names.
  private static final Field<String> SCOPE = KeyTable.of("k", KeyTable.SCOPE);
  private static final Field<String> KEY = KeyTable.of("k", KeyTable.KEY);
  private static final Field<String> STATE = KeyTable.of("k", KeyTable.STATE);
  private static final Table<?> BREAKS = DSL.table(DSL.name("idem", "idem_breaks"));

  private final Context context;
  private final Operations operations;
  private final String insertBreak;

  Reconciliation(Context context) {
    this.context = context;
    this.operations = Factories.make(Operations.class, Void.class, Operations.class, context, null);
    DSLContext d = context.dsl();
    this.insertBreak = d.render(d.insertInto(BREAKS,
            DSL.field(DSL.name("found_at")), DSL.field(DSL.name("kind")), DSL.field(DSL.name("effect_table")),
            DSL.field(DSL.name("key")), DSL.field(DSL.name("detail")))
        .values(DSL.val((OffsetDateTime) null), DSL.val((String) null), DSL.val((String) null), DSL.val((String) null),
            DSL.val((String) null)));
  }

  static {
    Factories.register(Reconciliation.class, Void.class, Reconciliation.class, (context, none) -> new Reconciliation(context));
  }

  /**
   * Compares {@code target} with idem's keys, in one snapshot; writes nothing.
   *
   * @throws IllegalArgumentException if {@code target} is null
   * @throws DataAccessException if a query failed (a table or column that does not exist)
   */
  public Findings check(EffectTable target) {
    if (target == null) {
      throw new IllegalArgumentException("target must not be null");
    }
    boolean maria = context.mariadb();
    DSLContext d = context.dsl();
    // The name as given, in a template: the schema mapping (and MariaDB's unqualified rendering of
    // idem's own tables) is for idem's schema, never the effect table's.
    Table<?> effects = DSL.table("{0}", target.schema() == null ? DSL.name(target.table()) : DSL.name(target.schema(), target.table()))
        .as("e");
    Field<Object> keyColumn = DSL.field(DSL.name("e", target.keyColumn()));
    // MariaDB: compared as idem's keys are on PostgreSQL, code point by code point (no case or
    // trailing-space folding), whatever the effect column's type or collation.
    Field<String> keyText = maria ? exact(DSL.field("cast({0} as char character set utf8mb4)", String.class, keyColumn))
        : keyColumn.cast(SQLDataType.CLOB);
    int n = target.sample();
    String duplicates = d.render(d.select(keyText, DSL.count()).from(effects).where(keyColumn.isNotNull())
        .groupBy(maria ? keyText : keyColumn).having(DSL.count().gt(DSL.inline(1))).orderBy(DSL.count().desc(), keyText)
        .limit(DSL.inline(n)));
    String withoutKeyCount = d.render(d.selectCount().from(effects).where(keyColumn.isNull()));
    String keysWithoutEffect = target.scope() == null ? null : d.render(d.select(KEY).from(KeyTable.T.as("k"))
        .where(SCOPE.eq(DSL.val((String) null, SCOPE))).and(STATE.eq(DSL.inline(KeyTable.COMPLETED)))
        // MariaDB runs NOT EXISTS (and a NOT IN across two collations) as a scan of the effects per
        // key; a NOT IN of one collation it answers from the effects' keys materialized once
        .and(maria ? exact(KEY).notIn(d.select(keyText).from(effects).where(keyColumn.isNotNull()))
            : DSL.notExists(d.selectOne().from(effects).where(keyText.eq(KEY))))
        .orderBy(KEY).limit(DSL.inline(n)));
    return context.ownedOnceByIdem(tx -> {
      Connection c = tx.connection();
      try {
        try (Statement st = c.createStatement()) {
          // One snapshot for every query, and nothing written: the counts agree with one another.
          st.execute("set transaction isolation level repeatable read, read only");
        }
        OffsetDateTime at;
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(maria ? "select utc_timestamp(6)" : "select now()")) {
          rs.next();
          at = DbTime.read(rs, 1, maria);
        }
        List<Findings.Duplicate> dup = new ArrayList<>();
        try (PreparedStatement ps = c.prepareStatement(duplicates); ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            dup.add(new FindingsValue.DuplicateValue(rs.getString(1), rs.getLong(2)));
          }
        }
        long without = strings(c, withoutKeyCount).stream().mapToLong(Long::parseLong).sum();
        Field<String> address = maria ? primaryKeyText(c, target) : DSL.field(DSL.name("e", "ctid")).cast(SQLDataType.CLOB);
        List<String> withoutSample = strings(c, d.render(d.select(address).from(effects).where(keyColumn.isNull())
            .limit(DSL.inline(n))));
        List<String> orphanKeys = keysWithoutEffect == null ? List.of() : strings(c, keysWithoutEffect, target.scope());
        // The operator's queries, joining this transaction (open on this thread): the same snapshot.
        UnknownOutcomes unknown = operations.unknownOutcomes();
        List<StuckKey> stuck = unknown.count() == 0 ? List.of() : operations.stuckKeys(n);
        return new FindingsValue(target, at, dup, without, withoutSample, orphanKeys, unknown, stuck);
      } catch (SQLException e) {
        throw new DataAccessException("could not reconcile " + target.describe() + ": " + e.getMessage(), e);
      }
    });
  }

  /** {@code text} in MariaDB's collation that compares code points, trailing spaces included. */
  private static Field<String> exact(Field<String> text) {
    return DSL.field("{0} collate utf8mb4_nopad_bin", String.class, text);
  }

  /**
   * MariaDB's address of an effect row (it has no {@code ctid}): its primary key, as {@code
   * column=value} joined by ", ", read from the table's definition in this transaction.
   *
   * @throws IllegalArgumentException naming the table if it has no primary key
   */
  private static Field<String> primaryKeyText(Connection c, EffectTable target) throws SQLException {
    List<String> columns = strings(c, "select column_name from information_schema.statistics where table_schema ="
        + " coalesce(?, database()) and table_name = ? and index_name = 'PRIMARY' order by seq_in_index",
        target.schema(), target.table());
    if (columns.isEmpty()) {
      throw new IllegalArgumentException("effect table " + target.describe() + " has no primary key: on MariaDB"
          + " reconciliation names an effect with no key by its primary key; give the table one");
    }
    Field<String> text = null;
    for (String column : columns) {
      Field<String> part = DSL.concat(DSL.inline(column + "="), DSL.field(DSL.name("e", column)).cast(SQLDataType.VARCHAR));
      text = text == null ? part : DSL.concat(text, DSL.inline(", "), part);
    }
    return text;
  }

  private static List<String> strings(Connection c, String sql, String... params) throws SQLException {
    List<String> out = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      for (int i = 0; params != null && i < params.length; i++) {
        ps.setString(i + 1, params[i]);
      }
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          out.add(rs.getString(1));
        }
      }
    }
    return out;
  }

  /**
   * Inserts one break row per example in {@code findings} into {@code idem_breaks}, stamped with
   * the check's database time, in one transaction (joins the one open on this thread). The effects
   * with no key are one row per sampled address, whose detail carries the total count.
   *
   * @return the rows inserted (0 for clean findings)
   * @throws IllegalArgumentException if {@code findings} is null
   */
  public int record(Findings findings) {
    if (findings == null) {
      throw new IllegalArgumentException("findings must not be null");
    }
    String table = findings.target().describe();
    // MariaDB's found_at is a DATETIME holding UTC: bound as that, whatever the session's zone
    Object at = context.mariadb() ? findings.checkedAt().withOffsetSameInstant(ZoneOffset.UTC).toLocalDateTime()
        : findings.checkedAt();
    return context.inTransaction(tx -> {
      try (PreparedStatement ps = tx.connection().prepareStatement(insertBreak)) {
        int rows = 0;
        for (Findings.Duplicate dup : findings.duplicates()) {
          rows += add(ps, at, table, "DUPLICATE_EFFECT", dup.key(), dup.effects() + " effects for one intent");
        }
        for (String ctid : findings.effectsWithoutKeySample()) {
          rows += add(ps, at, table, "EFFECT_WITHOUT_KEY", null,
              "row " + ctid + " has no key (" + findings.effectsWithoutKey() + " such effects)");
        }
        for (String key : findings.keysWithoutEffect()) {
          rows += add(ps, at, table, "KEY_WITHOUT_EFFECT", key, "completed key of scope " + findings.target().scope()
              + " has no effect");
        }
        for (StuckKey s : findings.unknownSample()) {
          rows += add(ps, at, table, "UNKNOWN_OUTCOME", s.key().toString(), "fence " + s.fence() + ", call key "
              + s.callKey() + ", lease ended " + s.leaseEndedAgo() + " ago");
        }
        return rows;
      } catch (SQLException e) {
        throw new DataAccessException("could not record the breaks of " + table + ": " + e.getMessage(), e);
      }
    });
  }

  private static int add(PreparedStatement ps, Object at, String table, String kind, String key, String detail)
      throws SQLException {
    ps.setObject(1, at);
    ps.setString(2, kind);
    ps.setString(3, table);
    ps.setString(4, key);
    ps.setString(5, detail);
    return ps.executeUpdate();
  }
}
