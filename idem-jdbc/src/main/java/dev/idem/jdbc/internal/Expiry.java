package dev.idem.jdbc.internal;

import java.time.OffsetDateTime;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.jooq.impl.DSL;

/**
 * Deletes rows past their time in bounded batches, each its own short transaction on a connection
 * of its own (also when called inside one of the caller's: it then needs a second connection), so
 * expiry never runs one huge DELETE that holds locks and bloats the table at once. Rows locked by
 * another transaction are skipped, never waited for. Times come from the database clock. Not an API.
 */
public final class Expiry {
  private static final Field<Object> CTID = DSL.field(DSL.name("ctid"));

  private Expiry() {}

  /**
   * Deletes rows of {@code table} where {@code condition} holds, {@code batchSize} at a time, until
   * none is left or {@code maxBatches} batches ran.
   *
   * @return the number of rows deleted
   */
  public static long deleteInBatches(Context idem, Table<?> table, Condition condition, int batchSize, int maxBatches) {
    return deleteInBatches(idem, table, condition, null, batchSize, maxBatches);
  }

  /**
   * As {@link #deleteInBatches(Context, Table, Condition, int, int)}; if {@code fence} is not null,
   * each batch also raises the schema's fence floor to the highest {@code fence} it deleted, in the
   * same transaction, before it commits: so no claim can see a row gone before the floor is above
   * every token the row handed out (see the migration V1__idem.sql, {@code idem_raise_fence_floor}).
   */
  public static long deleteInBatches(Context idem, Table<?> table, Condition condition, Field<Long> fence,
      int batchSize, int maxBatches) {
    long total = 0;
    for (int batch = 0; batch < maxBatches; batch++) {
      // One short transaction per batch, on a connection of its own, even when called inside the
      // caller's transaction (which would make it one long delete); at READ COMMITTED whatever the
      // pool's level, since it rests on its row locks, not on a snapshot.
      // SKIP LOCKED: a row another transaction holds (re-claiming it, or the caller's own, which
      // this connection would wait on forever) is left for a later run; the lock re-checks the
      // condition on the row's latest version, so a row re-claimed meanwhile is not deleted.
      int deleted = OwnTransaction.runReadCommitted(idem.dataSource(), c -> {
        DSLContext dsl = idem.dsl(c);
        var delete = dsl.deleteFrom(table)
            .where(CTID.in(DSL.select(CTID).from(table).where(condition).limit(batchSize).forUpdate().skipLocked()));
        if (fence == null) {
          return delete.execute();
        }
        return dsl.resultQuery("with deleted as ({0}) select count(*), {1}(max(deleted.{2})) from deleted",
                delete.returning(fence), DSL.name(idem.schema(), "idem_raise_fence_floor"), DSL.name(fence.getName()))
            .fetchOne(0, int.class);
      });
      total += deleted;
      if (deleted < batchSize) {
        break;
      }
    }
    return total;
  }
}
