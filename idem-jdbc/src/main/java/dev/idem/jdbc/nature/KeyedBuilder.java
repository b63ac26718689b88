package dev.idem.jdbc.nature;

import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.Context;

/**
 * What the builders of {@link Totals} and {@link UniqueRows} share: the table and the columns of
 * its unique key, checked when built.
 *
 * @param <B> the builder, returned by {@link #key} for chaining
 */
abstract class KeyedBuilder<B extends KeyedBuilder<B>> {
  final Context idem;
  final String table;
  String[] key;

  KeyedBuilder(Context idem, String table) {
    this.idem = Require.notNull(idem, "idem");
    this.table = table;
  }

  /**
   * The columns of the table's unique constraint (or primary key) that make a row exist once:
   * {@code ("ad_id", "minute")} for a total, {@code ("user_id", "post_id")} for a set, {@code
   * ("order_id", "step")} for a business key. Required.
   */
  public B key(String... columns) {
    this.key = columns == null ? null : columns.clone();
    return self();
  }

  abstract B self();
}
