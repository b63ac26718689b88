package dev.idem.jdbc.internal;

import java.time.OffsetDateTime;
import org.jooq.DataType;
import org.jooq.Field;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The executor's key table ({@code idem_keys}), its columns and states, written against schema
 * "idem" (mapped at render): one definition for the claim engine, the operator's view and
 * reconciliation. Not an API.
 */
public final class KeyTable {
  public static final Table<?> T = DSL.table(DSL.name("idem", "idem_keys"));
  public static final Field<String> SCOPE = f("scope", SQLDataType.CLOB);
  public static final Field<String> KEY = f("key", SQLDataType.CLOB);
  public static final Field<String> STATE = f("state", SQLDataType.CHAR(1));
  public static final Field<Long> FENCE = f("fence", SQLDataType.BIGINT);
  public static final Field<OffsetDateTime> LEASE_EXPIRES_AT = f("lease_expires_at", SQLDataType.TIMESTAMPWITHTIMEZONE);
  public static final Field<String> CALL_KEY = f("call_key", SQLDataType.CLOB);
  public static final Field<byte[]> RESULT = f("result", SQLDataType.BLOB);
  public static final Field<OffsetDateTime> CREATED_AT = f("created_at", SQLDataType.TIMESTAMPWITHTIMEZONE);
  public static final Field<OffsetDateTime> COMPLETED_AT = f("completed_at", SQLDataType.TIMESTAMPWITHTIMEZONE);
  public static final Field<OffsetDateTime> EXPIRES_AT = f("expires_at", SQLDataType.TIMESTAMPWITHTIMEZONE);

  /** State of a claim whose effect has not been recorded (an external call in progress, or lost). */
  public static final String IN_FLIGHT = "I";
  /** State of a key whose outcome is recorded. */
  public static final String COMPLETED = "C";

  private KeyTable() {}

  /** {@code column} qualified by the alias {@code table}, for a query that names another table's columns too. */
  public static <T> Field<T> of(String table, Field<T> column) {
    return DSL.field(DSL.name(table, column.getName()), column.getDataType());
  }

  private static <T> Field<T> f(String name, DataType<T> type) {
    return DSL.field(DSL.name(name), type);
  }
}
