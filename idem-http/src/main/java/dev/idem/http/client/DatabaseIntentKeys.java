package dev.idem.http.client;

import dev.idem.jdbc.Idem;
import java.time.LocalDateTime;
import org.jooq.Field;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.impl.DSL;

/** {@link IntentKeys#database(Idem)}: the table idem_intent_keys, in idem's schema. */
final class DatabaseIntentKeys implements IntentKeys {
  // Named in idem's default schema: idem's jOOQ settings map it to the configured one.
  private static final Table<?> TABLE = DSL.table(DSL.name(Idem.DEFAULT_SCHEMA, "idem_intent_keys"));
  private static final Field<String> INTENT = DSL.field(DSL.name("intent"), String.class);
  private static final Field<String> KEY = DSL.field(DSL.name("idempotency_key"), String.class);
  private static final Field<LocalDateTime> CREATED_AT = DSL.field(DSL.name("created_at"), LocalDateTime.class);

  private final Idem idem;

  DatabaseIntentKeys(Idem idem) {
    if (idem == null) {
      throw new IllegalArgumentException("idem must not be null");
    }
    this.idem = idem;
  }

  @Override
  public String keyFor(String intent) {
    Intents.check(intent);
    String minted = Intents.mint();
    return idem.inTransaction(tx -> {
      SQLDialect family = tx.dsl().dialect().family();
      boolean mariadb = family == SQLDialect.MARIADB || family == SQLDialect.MYSQL;
      // The database clock, in UTC on MariaDB (a DATETIME holds no zone).
      Field<LocalDateTime> now = DSL.field(mariadb ? "UTC_TIMESTAMP(6)" : "clock_timestamp()", LocalDateTime.class);
      // Insert first, read after: the read then sees the row whoever wrote it (on MariaDB a read
      // first would fix the snapshot before another process's insert, and miss it after).
      tx.dsl().insertInto(TABLE).set(INTENT, intent).set(KEY, minted).set(CREATED_AT, now).onDuplicateKeyIgnore().execute();
      return tx.dsl().select(KEY).from(TABLE).where(INTENT.eq(intent)).fetchOne(KEY);
    });
  }

  @Override
  public void release(String intent) {
    Intents.check(intent);
    idem.useTransaction(tx -> tx.dsl().deleteFrom(TABLE).where(INTENT.eq(intent)).execute());
  }

  @Override
  public String toString() {
    return "IntentKeys.database[" + idem.schema() + ".idem_intent_keys]";
  }
}
