package dev.idem.jdbc.reconcile;

import dev.idem.jdbc.internal.Identifiers;

/**
 * Where a service's effects live, for {@link Reconciliation#check}: the table, the column that
 * carries each effect's intent key (the value of the {@code IdempotencyKey}), and optionally the
 * schema, the scope of idem's keys to compare with and how many examples each finding lists. Start
 * with {@link #of}. Names are checked to be plain identifiers (letters, digits, underscores, 1 to
 * 63) and are rendered quoted, so they are case-sensitive as written. Immutable.
 */
public final class EffectTable {
  /** The examples each finding lists by default. */
  public static final int DEFAULT_SAMPLE = 20;

  private final String schema;
  private final String table;
  private final String keyColumn;
  private final String scope;
  private final int sample;
  private final String referenceColumn;

  EffectTable(String schema, String table, String keyColumn, String scope, int sample) {
    this(schema, table, keyColumn, scope, sample, null);
  }

  /** @throws IllegalArgumentException naming the bad argument */
  private EffectTable(String schema, String table, String keyColumn, String scope, int sample, String referenceColumn) {
    if (schema != null) {
      Identifiers.check("schema", schema);
    }
    Identifiers.check("table", table);
    Identifiers.check("keyColumn", keyColumn);
    if (scope != null && scope.isEmpty()) {
      throw new IllegalArgumentException("scope must not be empty (null compares no scope)");
    }
    if (sample < 1 || sample > 10_000) {
      throw new IllegalArgumentException("sample must be within 1 and 10000, was " + sample);
    }
    this.schema = schema;
    this.table = table;
    this.keyColumn = keyColumn;
    this.scope = scope;
    this.sample = sample;
    if (referenceColumn != null) {
      Identifiers.check("referenceColumn", referenceColumn);
    }
    this.referenceColumn = referenceColumn;
  }

  /**
   * {@code table} on the search path (on MariaDB: in the connection's database), keyed by {@code
   * keyColumn}, no scope, {@value #DEFAULT_SAMPLE} examples.
   */
  public static EffectTable of(String table, String keyColumn) {
    return new EffectTable(null, table, keyColumn, null, DEFAULT_SAMPLE);
  }

  /** The same table in {@code schema} (on MariaDB a database; null for the connection's search path or database). */
  public EffectTable inSchema(String schema) {
    return new EffectTable(schema, table, keyColumn, scope, sample, referenceColumn);
  }

  /** Compared with idem's keys of {@code scope} too ("keys with no effect"); null skips that. */
  public EffectTable withScope(String scope) {
    return new EffectTable(schema, table, keyColumn, scope, sample, referenceColumn);
  }

  /** Each finding lists at most {@code sample} examples (1 to 10,000). */
  public EffectTable withSample(int sample) {
    return new EffectTable(schema, table, keyColumn, scope, sample, referenceColumn);
  }

  /**
   * The column holding the reference the service sends the provider with each call (a payment id
   * as the charge's metadata): a provider check ({@link Reconciliation#check(EffectTable,
   * ProviderRecords, java.time.Duration)}) gives a provider effect carrying a reference the intent
   * of the row that holds it (its key column). Default: the key column itself (the intent key is
   * the reference sent).
   */
  public EffectTable withReference(String column) {
    return new EffectTable(schema, table, keyColumn, scope, sample, column);
  }

  String referenceColumn() {
    return referenceColumn == null ? keyColumn : referenceColumn;
  }

  String schema() {
    return schema;
  }

  String table() {
    return table;
  }

  String keyColumn() {
    return keyColumn;
  }

  String scope() {
    return scope;
  }

  int sample() {
    return sample;
  }

  /** {@code schema.table.keyColumn}, as the breaks table records it. */
  public String describe() {
    return (schema == null ? "" : schema + ".") + table + "." + keyColumn;
  }
}
