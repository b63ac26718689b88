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
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
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
 * <p>What idem's database never saw (a charge made before a crash rolled the service's transaction
 * back, a retry sent with a fresh key) only the provider's own records show: {@link
 * #check(EffectTable, ProviderRecords, Duration)} compares them too.
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
    return check(target, null);
  }

  /** The longest range of a provider check: a year. */
  public static final Duration MAX_PROVIDER_RANGE = Duration.ofDays(366);

  /**
   * {@link #check(EffectTable)}, and the provider's side: what {@code provider} lists for the last
   * {@code range} (ending now, by the database clock) compared with idem's external keys and
   * {@code target}. Each provider effect is given its intent: the idem key whose call key it
   * carried ({@code ExternalAttempt.callKey()}; of {@code target}'s {@linkplain EffectTable#withScope
   * scope} when it has one, else of any scope, so that keys of the same value in two scopes that
   * call the provider, a charge and a refund of one order, count as one intent: give the table its
   * scope then), else the key of {@code target}'s row
   * whose {@linkplain EffectTable#withReference reference column} holds the reference it carried.
   * Reported ({@link Findings#provider()}): an intent with more than one provider effect (two
   * charges for one order: the double charge every guard missed), a provider effect that belongs to
   * no intent (sent without our key or reference, or with one we never made), and a completed
   * external key of {@code target}'s scope (every scope without one), claimed and completed within
   * the range, whose call key the provider has no effect for.
   *
   * <p>The provider is asked first, outside any transaction (it may be slow, and a snapshot held
   * open meanwhile would hold back PostgreSQL's vacuum); idem's tables are then read in one snapshot
   * as {@link #check(EffectTable)} does. Not guaranteed: an effect near the range's start whose key
   * completed before it is judged by neither side (so give ranges that overlap, a day checked for
   * the last two), and a completed call that ended in no effect (a decline) is reported as a key
   * the provider never saw. Keys are compared exactly (case and trailing spaces count). The external
   * keys are scanned (the key table has no index on call keys), and the provider's effects are held
   * in memory: ranges of at most a day's effects.
   *
   * @param range how far back from now, positive, at most {@link #MAX_PROVIDER_RANGE}
   * @throws IllegalArgumentException if an argument is null or {@code range} is out of bounds
   * @throws IllegalStateException if the provider's records could not be read (its exception is the
   *     cause), or listed a null effect; nothing was read from idem's tables
   * @throws DataAccessException if a query failed
   */
  public Findings check(EffectTable target, ProviderRecords provider, Duration range) {
    if (target == null) {
      throw new IllegalArgumentException("target must not be null");
    }
    if (provider == null) {
      throw new IllegalArgumentException("provider must not be null");
    }
    if (range == null || range.isNegative() || range.isZero() || range.compareTo(MAX_PROVIDER_RANGE) > 0) {
      throw new IllegalArgumentException("range must be positive and at most " + MAX_PROVIDER_RANGE + ", was " + range);
    }
    OffsetDateTime to = context.ownedOnceByIdem(tx -> {
      try {
        return now(tx.connection());
      } catch (SQLException e) {
        throw new DataAccessException("could not read the database clock: " + e.getMessage(), e);
      }
    });
    OffsetDateTime from = to.minus(range);
    List<ProviderEffect> listed;
    try {
      listed = provider.effects(from, to);
    } catch (Exception e) {
      throw new IllegalStateException("could not read the provider's records from " + from + " to " + to + ": " + e, e);
    }
    if (listed == null || listed.contains(null)) {
      throw new IllegalStateException("the provider's records listed " + (listed == null ? "no list" : "a null effect")
          + " from " + from + " to " + to);
    }
    return check(target, new ProviderSide(from, to, List.copyOf(listed)));
  }

  /** The provider's records of one check, read before its snapshot. */
  private record ProviderSide(OffsetDateTime from, OffsetDateTime to, List<ProviderEffect> effects) {}

  private OffsetDateTime now(Connection c) throws SQLException {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery(context.mariadb() ? "select utc_timestamp(6)" : "select now()")) {
      rs.next();
      return DbTime.read(rs, 1, context.mariadb());
    }
  }

  private Findings check(EffectTable target, ProviderSide side) {
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
        OffsetDateTime at = now(c);
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
        Optional<ProviderFindings> provider = side == null ? Optional.empty()
            : Optional.of(providerFindings(c, target, effects, side));
        return new FindingsValue(target, at, dup, without, withoutSample, orphanKeys, unknown, stuck, provider);
      } catch (SQLException e) {
        throw new DataAccessException("could not reconcile " + target.describe() + ": " + e.getMessage(), e);
      }
    });
  }

  /** How many references one statement looks up. */
  private static final int REFERENCES_PER_STATEMENT = 500;

  /** Every external key (one with a call key): scanned once per provider check. */
  private static final Field<String> CALL_KEY = KeyTable.of("k", KeyTable.CALL_KEY);

  /**
   * The provider side of a check, in its snapshot: each provider effect given its intent (by call
   * key, then by reference), then the breaks.
   */
  private ProviderFindings providerFindings(Connection c, EffectTable target, Table<?> effects, ProviderSide side)
      throws SQLException {
    boolean maria = context.mariadb();
    DSLContext d = context.dsl();
    int n = target.sample();
    // One effect once, however often the provider listed it (a paged listing may repeat an edge)
    Map<String, ProviderEffect> byId = new LinkedHashMap<>();
    side.effects().forEach(e -> byId.putIfAbsent(e.id(), e));
    Set<String> callKeys = new HashSet<>();
    byId.values().stream().map(ProviderEffect::callKey).filter(Objects::nonNull).forEach(callKeys::add);

    // idem's external keys: the intent of each call key the provider saw, and the completed ones it did not
    Map<String, String> intentByCall = new HashMap<>();
    long unseenCount = 0;
    List<ProviderFindings.UnseenKey> unseen = new ArrayList<>();
    String external = d.render(d.select(SCOPE, KEY, CALL_KEY, STATE, KeyTable.of("k", KeyTable.CREATED_AT),
        KeyTable.of("k", KeyTable.COMPLETED_AT)).from(KeyTable.T.as("k")).where(CALL_KEY.isNotNull()));
    try (PreparedStatement ps = c.prepareStatement(external)) {
      ps.setFetchSize(1000);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          String scope = rs.getString(1);
          String key = rs.getString(2);
          String callKey = rs.getString(3);
          if (target.scope() != null && !target.scope().equals(scope)) {
            // another scope's key (a refund of the same order, say) is another intent, though its value
            // may be the same: with a scope, only that scope's calls are this table's
            continue;
          }
          if (callKeys.contains(callKey)) {
            intentByCall.put(callKey, key);
            continue;
          }
          OffsetDateTime created = DbTime.read(rs, 5, maria);
          OffsetDateTime completed = DbTime.read(rs, 6, maria);
          if (KeyTable.COMPLETED.equals(rs.getString(4)) && completed != null && !created.isBefore(side.from())
              && completed.isBefore(side.to())) {
            unseenCount++;
            if (unseen.size() < n) {
              unseen.add(new ProviderFindings.UnseenKey(dev.idem.key.IdempotencyKey.of(scope, key), callKey, completed));
            }
          }
        }
      }
    }

    // the service's effect rows: the intent of each reference the provider carried
    Field<Object> keyColumn = DSL.field(DSL.name("e", target.keyColumn()));
    Field<Object> refColumn = DSL.field(DSL.name("e", target.referenceColumn()));
    Field<String> keyText = text(maria, keyColumn);
    Field<String> refText = text(maria, refColumn);
    List<String> refs = byId.values().stream().filter(e -> e.callKey() == null || !intentByCall.containsKey(e.callKey()))
        .map(ProviderEffect::reference).filter(Objects::nonNull).distinct().toList();
    Map<String, String> intentByRef = new HashMap<>();
    for (int i = 0; i < refs.size(); i += REFERENCES_PER_STATEMENT) {
      List<String> chunk = refs.subList(i, Math.min(refs.size(), i + REFERENCES_PER_STATEMENT));
      String sql = d.render(d.select(refText, keyText).from(effects).where(keyColumn.isNotNull())
          .and(refText.in(chunk.stream().map(r -> DSL.val((String) null, String.class)).toList())));
      try (PreparedStatement ps = c.prepareStatement(sql)) {
        for (int j = 0; j < chunk.size(); j++) {
          ps.setString(j + 1, chunk.get(j));
        }
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            intentByRef.putIfAbsent(rs.getString(1), rs.getString(2));
          }
        }
      }
    }

    Map<String, List<ProviderEffect>> byIntent = new LinkedHashMap<>();
    List<ProviderEffect> withoutKey = new ArrayList<>();
    long withoutKeyCount = 0;
    for (ProviderEffect e : byId.values()) {
      String intent = e.callKey() == null ? null : intentByCall.get(e.callKey());
      if (intent == null && e.reference() != null) {
        intent = intentByRef.get(e.reference());
      }
      if (intent == null) {
        withoutKeyCount++;
        if (withoutKey.size() < n) {
          withoutKey.add(e);
        }
      } else {
        byIntent.computeIfAbsent(intent, k -> new ArrayList<>()).add(e);
      }
    }
    List<ProviderFindings.DoubleEffect> doubles = byIntent.entrySet().stream().filter(en -> en.getValue().size() > 1)
        .map(en -> new ProviderFindings.DoubleEffect(en.getKey(),
            en.getValue().stream().sorted(Comparator.comparing(ProviderEffect::at)).toList()))
        .sorted(Comparator.comparing((ProviderFindings.DoubleEffect x) -> -x.effects().size())
            .thenComparing(ProviderFindings.DoubleEffect::intent))
        .toList();
    return new ProviderFindings(side.from(), side.to(), byId.size(), doubles.size(), doubles.stream().limit(n).toList(),
        withoutKeyCount, withoutKey, unseenCount, unseen);
  }

  /** A column of the effect table as text compared exactly (see {@link #check(EffectTable)}). */
  private static Field<String> text(boolean maria, Field<Object> column) {
    return maria ? exact(DSL.field("cast({0} as char character set utf8mb4)", String.class, column)) : column.cast(SQLDataType.CLOB);
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
   * Inserts one break row per example in {@code findings} into {@code idem_breaks} (the provider's
   * breaks too, as kinds {@code PROVIDER_DUPLICATE}, {@code PROVIDER_EFFECT_WITHOUT_KEY} and {@code
   * KEY_WITHOUT_PROVIDER_EFFECT}), stamped with the check's database time, in one transaction (joins the one open on this thread). The effects
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
        if (findings.provider().isPresent()) {
          ProviderFindings p = findings.provider().get();
          for (ProviderFindings.DoubleEffect dup : p.duplicates()) {
            rows += add(ps, at, table, "PROVIDER_DUPLICATE", dup.intent(), dup.effects().size() + " provider effects for one"
                + " intent, amount " + dup.amount() + ": " + dup.effects().stream().map(ProviderEffect::id).toList());
          }
          for (ProviderEffect e : p.effectsWithoutKey()) {
            rows += add(ps, at, table, "PROVIDER_EFFECT_WITHOUT_KEY", null, "provider effect " + e.id() + " at " + e.at()
                + ", amount " + e.amount() + ", call key " + e.callKey() + ", reference " + e.reference()
                + " belongs to no intent (" + p.effectsWithoutKeyCount() + " such effects)");
          }
          for (ProviderFindings.UnseenKey k : p.keysUnseen()) {
            rows += add(ps, at, table, "KEY_WITHOUT_PROVIDER_EFFECT", k.key().toString(), "completed " + k.completedAt()
                + ", call key " + k.callKey() + ": the provider has no effect for it from " + p.from() + " to " + p.to());
          }
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
