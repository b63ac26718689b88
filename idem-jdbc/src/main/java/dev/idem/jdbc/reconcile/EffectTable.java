package dev.idem.jdbc.reconcile;

import dev.idem.jdbc.internal.Identifiers;

/**
 * Where a service's effects live, for {@link Reconciliation#check}: the table, the column that
 * carries each effect's intent key (the value of the {@code IdempotencyKey}), and optionally the
 * scope of idem's keys to compare with. Names are checked to be plain identifiers (letters, digits,
 * underscores, 1 to 63) and are rendered quoted, so they are case-sensitive as written.
 *
 * @param schema the table's schema, or null for the connection's search path
 * @param scope the scope of idem's keys these effects answer; null skips "keys with no effect"
 * @param sample how many examples each finding lists at most (1 to 10,000)
 */
public record EffectTable(String schema, String table, String keyColumn, String scope, int sample) {
  /** The examples each finding lists by default. */
  public static final int DEFAULT_SAMPLE = 20;

  /** @throws IllegalArgumentException naming the bad argument */
  public EffectTable {
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
  }

  /** {@code table} on the search path, keyed by {@code keyColumn}, no scope, {@value #DEFAULT_SAMPLE} examples. */
  public static EffectTable of(String table, String keyColumn) {
    return new EffectTable(null, table, keyColumn, null, DEFAULT_SAMPLE);
  }

  public EffectTable inSchema(String schema) {
    return new EffectTable(schema, table, keyColumn, scope, sample);
  }

  public EffectTable withScope(String scope) {
    return new EffectTable(schema, table, keyColumn, scope, sample);
  }

  public EffectTable withSample(int sample) {
    return new EffectTable(schema, table, keyColumn, scope, sample);
  }

  /** {@code schema.table.keyColumn}, as the breaks table records it. */
  public String describe() {
    return (schema == null ? "" : schema + ".") + table + "." + keyColumn;
  }
}
