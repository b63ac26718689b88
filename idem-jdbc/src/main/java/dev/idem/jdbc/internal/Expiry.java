package dev.idem.jdbc.internal;

import java.util.List;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record;
import org.jooq.Result;
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
  /** MariaDB's fence floor: one row (id 1), see the migration mariadb/V1__idem.sql. */
  private static final Table<?> FENCE_FLOOR = DSL.table(DSL.name("idem", "idem_fence_floor"));
  private static final Field<Long> FLOOR = DSL.field(DSL.name("floor"), Long.class);
  private static final Field<Integer> FLOOR_ID = DSL.field(DSL.name("id"), Integer.class);

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
   * each batch also raises the schema's fence floor to at least the highest {@code fence} it
   * deletes, committed no later than its delete: so no claim can see a row gone before the floor is
   * above every token the row handed out. On PostgreSQL in the batch's own transaction (the floor
   * is a sequence, which every transaction sees at once: see postgresql/V1__idem.sql, {@code
   * idem_raise_fence_floor}); on MariaDB, where the floor is a row, in a transaction of its own
   * that commits before the batch's delete does (see {@link #mariaDbBatch}).
   */
  public static long deleteInBatches(Context idem, Table<?> table, Condition condition, Field<Long> fence,
      int batchSize, int maxBatches) {
    boolean maria = idem.mariadb();
    List<Field<Object>> primaryKey = maria ? primaryKey(table) : null;
    long total = 0;
    for (int batch = 0; batch < maxBatches; batch++) {
      int deleted = maria ? mariaDbBatch(idem, table, primaryKey, condition, fence, batchSize)
          : postgresBatch(idem, table, condition, fence, batchSize);
      total += deleted;
      if (deleted < batchSize) {
        break;
      }
    }
    return total;
  }

  private static int postgresBatch(Context idem, Table<?> table, Condition condition, Field<Long> fence, int batchSize) {
    // One short transaction per batch, on a connection of its own, even when called inside the
    // caller's transaction (which would make it one long delete); at READ COMMITTED whatever the
    // pool's level, since it rests on its row locks, not on a snapshot.
    // SKIP LOCKED: a row another transaction holds (re-claiming it, or the caller's own, which
    // this connection would wait on forever) is left for a later run; the lock re-checks the
    // condition on the row's latest version, so a row re-claimed meanwhile is not deleted.
    return OwnTransaction.runReadCommitted(idem.dataSource(), c -> {
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
  }

  /**
   * One batch on MariaDB, which has no {@code ctid}, no writable CTE and no {@code SKIP LOCKED} on
   * a DELETE: the batch locks its rows' primary keys with a locking read ({@code FOR UPDATE SKIP
   * LOCKED}, which at READ COMMITTED reads and re-checks the condition on each row's latest
   * committed version, and takes no gap locks), then deletes exactly those rows, each by its key.
   *
   * <p>With a {@code fence}, the floor is raised first, in a transaction of its own that commits
   * before the batch's begins, to the highest fence of the rows the batch is about to take (read
   * without locks); the batch then takes only rows whose fence is at most that value. A row
   * re-claimed in between has a higher fence (it is left for a later run, as the fence floor has
   * not covered it), or is no longer past its time (the condition leaves it). An external claim
   * reads the floor with a locking read in its insert: before the raise, which then waits for the
   * claim to commit (the key's row is still there, so the claim re-claims it above its fence), or
   * after it, seeing the floor at or above every token the deleted row handed out. Raising the
   * floor above the fences of rows not deleted after all only makes later tokens higher.
   */
  private static int mariaDbBatch(Context idem, Table<?> table, List<Field<Object>> primaryKey, Condition condition,
      Field<Long> fence, int batchSize) {
    Condition deletable = condition;
    if (fence != null) {
      Long highest = idem.autoCommitOnce("idem expiry: raise the fence floor", c -> {
        DSLContext dsl = idem.dsl(c);
        Table<?> candidates = DSL.select(fence).from(table).where(condition).limit(batchSize).asTable("candidates");
        Field<Long> candidate = DSL.field(DSL.name("candidates", fence.getName()), Long.class);
        Long max = dsl.select(DSL.max(candidate)).from(candidates).fetchOne(0, Long.class);
        if (max != null) {
          dsl.update(FENCE_FLOOR).set(FLOOR, DSL.greatest(FLOOR, DSL.val(max))).where(FLOOR_ID.eq(DSL.inline(1))).execute();
        }
        return max;
      });
      deletable = condition.and(highest == null ? fence.isNull() : fence.isNull().or(fence.le(highest)));
    }
    Condition rows = deletable;
    return OwnTransaction.runReadCommitted(idem.dataSource(), c -> {
      DSLContext dsl = idem.dsl(c);
      Result<Record> locked = dsl.select(primaryKey).from(table).where(rows).limit(batchSize).forUpdate().skipLocked().fetch();
      if (locked.isEmpty()) {
        return 0;
      }
      // One delete per row, by its whole primary key: an equality MariaDB always answers from the
      // primary key, touching no other row. A delete of several (an IN list of rows) may scan the
      // table instead, and at READ COMMITTED a DELETE waits on every locked row it reads, matching
      // or not (the semi-consistent read that skips them is an UPDATE's only).
      Condition byKey = DSL.and(primaryKey.stream().map(k -> k.eq(DSL.val((Object) null))).toList());
      var batch = dsl.batch(dsl.deleteFrom(table).where(byKey));
      for (Record key : locked) {
        batch = batch.bind(key.intoArray());
      }
      batch.execute();
      // The rows are locked by this transaction since its read found them past their time: each
      // delete deletes its row (the driver's batch may not report counts one by one).
      return locked.size();
    });
  }

  /** The primary key of each of idem's tables expiry deletes from, which MariaDB deletes by. */
  private static List<Field<Object>> primaryKey(Table<?> table) {
    List<String> columns = switch (table.getName()) {
      case "idem_keys" -> List.of("scope", "key");
      case "idem_inbox" -> List.of("consumer", "message_id");
      case "idem_outbox" -> List.of("id");
      default -> throw new IllegalArgumentException("idem expiry on MariaDB deletes by primary key and knows none of "
          + table.getName());
    };
    return columns.stream().map(name -> DSL.field(DSL.name(name))).toList();
  }
}
