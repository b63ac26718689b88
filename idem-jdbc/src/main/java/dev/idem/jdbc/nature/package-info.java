/**
 * Writes that are idempotent by nature, on your own tables: a total that never moves backwards
 * ({@link dev.idem.jdbc.nature.Totals}) and a row that exists once under a unique key, for set
 * membership or a business key such as {@code (order_id, step)} ({@link
 * dev.idem.jdbc.nature.UniqueRows}). No key table and no window: the row remembers.
 */
package dev.idem.jdbc.nature;
