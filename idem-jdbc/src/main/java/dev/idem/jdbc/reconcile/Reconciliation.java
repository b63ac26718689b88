package dev.idem.jdbc.reconcile;

import dev.idem.jdbc.internal.Context;
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
    DSLContext d = context.dsl();
    Table<?> effects = (target.schema() == null ? DSL.table(DSL.name(target.table())) : DSL.table(DSL.name(target.schema(), target.table())))
        .as("e");
    Field<Object> keyColumn = DSL.field(DSL.name("e", target.keyColumn()));
    Field<String> keyText = keyColumn.cast(SQLDataType.CLOB);
    int n = target.sample();
    String duplicates = d.render(d.select(keyText, DSL.count()).from(effects).where(keyColumn.isNotNull())
        .groupBy(keyColumn).having(DSL.count().gt(DSL.inline(1))).orderBy(DSL.count().desc(), keyText).limit(DSL.inline(n)));
    String withoutKeyCount = d.render(d.selectCount().from(effects).where(keyColumn.isNull()));
    String withoutKeySample = d.render(d.select(DSL.field(DSL.name("e", "ctid")).cast(SQLDataType.CLOB)).from(effects)
        .where(keyColumn.isNull()).limit(DSL.inline(n)));
    String keysWithoutEffect = target.scope() == null ? null : d.render(d.select(KEY).from(KeyTable.T.as("k"))
        .where(SCOPE.eq(DSL.val((String) null, SCOPE))).and(STATE.eq(DSL.inline(KeyTable.COMPLETED)))
        .andNotExists(d.selectOne().from(effects).where(keyText.eq(KEY))).orderBy(KEY).limit(DSL.inline(n)));
    return context.ownedOnceByIdem(tx -> {
      Connection c = tx.connection();
      try {
        try (Statement st = c.createStatement()) {
          // One snapshot for every query, and nothing written: the counts agree with one another.
          st.execute("set transaction isolation level repeatable read, read only");
        }
        OffsetDateTime at;
        try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("select now()")) {
          rs.next();
          at = rs.getObject(1, OffsetDateTime.class);
        }
        List<Findings.Duplicate> dup = new ArrayList<>();
        try (PreparedStatement ps = c.prepareStatement(duplicates); ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            dup.add(new FindingsValue.DuplicateValue(rs.getString(1), rs.getLong(2)));
          }
        }
        long without = strings(c, withoutKeyCount, null).stream().mapToLong(Long::parseLong).sum();
        List<String> withoutSample = strings(c, withoutKeySample, null);
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

  private static List<String> strings(Connection c, String sql, String param) throws SQLException {
    List<String> out = new ArrayList<>();
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      if (param != null) {
        ps.setString(1, param);
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
    return context.inTransaction(tx -> {
      try (PreparedStatement ps = tx.connection().prepareStatement(insertBreak)) {
        int rows = 0;
        for (Findings.Duplicate dup : findings.duplicates()) {
          rows += add(ps, findings, table, "DUPLICATE_EFFECT", dup.key(), dup.effects() + " effects for one intent");
        }
        for (String ctid : findings.effectsWithoutKeySample()) {
          rows += add(ps, findings, table, "EFFECT_WITHOUT_KEY", null,
              "row " + ctid + " has no key (" + findings.effectsWithoutKey() + " such effects)");
        }
        for (String key : findings.keysWithoutEffect()) {
          rows += add(ps, findings, table, "KEY_WITHOUT_EFFECT", key, "completed key of scope " + findings.target().scope()
              + " has no effect");
        }
        for (StuckKey s : findings.unknownSample()) {
          rows += add(ps, findings, table, "UNKNOWN_OUTCOME", s.key().toString(), "fence " + s.fence() + ", call key "
              + s.callKey() + ", lease ended " + s.leaseEndedAgo() + " ago");
        }
        return rows;
      } catch (SQLException e) {
        throw new DataAccessException("could not record the breaks of " + table + ": " + e.getMessage(), e);
      }
    });
  }

  private static int add(PreparedStatement ps, Findings f, String table, String kind, String key, String detail)
      throws SQLException {
    ps.setObject(1, f.checkedAt());
    ps.setString(2, kind);
    ps.setString(3, table);
    ps.setString(4, key);
    ps.setString(5, detail);
    return ps.executeUpdate();
  }
}
