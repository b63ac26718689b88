package dev.idem.jdbc.internal;

import java.time.OffsetDateTime;
import java.util.UUID;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The outbox table and its columns, written against schema "idem" (mapped at render): one
 * definition for the outbox and relay, the re-drive and the operator's view. Not an API.
 */
public final class OutboxTable {
  public static final Table<?> T = DSL.table(DSL.name("idem", "idem_outbox"));
  /** The {@code OutboxLayout.DEBEZIUM} layout's table, in Debezium's Outbox Event Router's shape (see idem_outbox_events in V1__idem.sql). */
  public static final Table<?> EVENTS = DSL.table(DSL.name("idem", "idem_outbox_events"));
  public static final Field<UUID> ID = f("id", SQLDataType.UUID);
  /** The order the database wrote the messages in (an identity column). */
  public static final Field<Long> SEQ = f("seq", SQLDataType.BIGINT);
  public static final Field<String> TOPIC = f("topic", SQLDataType.CLOB);
  public static final Field<String> AGGREGATE_KEY = f("aggregate_key", SQLDataType.CLOB);
  public static final Field<byte[]> PAYLOAD = f("payload", SQLDataType.BLOB);
  public static final Field<String[]> HEADER_NAMES = f("header_names", SQLDataType.CLOB.array());
  public static final Field<String[]> HEADER_VALUES = f("header_values", SQLDataType.CLOB.array());
  public static final Field<OffsetDateTime> CREATED_AT = f("created_at", SQLDataType.TIMESTAMPWITHTIMEZONE);
  public static final Field<String> STATUS = f("status", SQLDataType.CHAR(1));
  public static final Field<Integer> ATTEMPTS = f("attempts", SQLDataType.INTEGER);
  public static final Field<OffsetDateTime> NEXT_ATTEMPT_AT = f("next_attempt_at", SQLDataType.TIMESTAMPWITHTIMEZONE);
  public static final Field<String> LAST_ERROR = f("last_error", SQLDataType.CLOB);
  public static final Field<OffsetDateTime> SENT_AT = f("sent_at", SQLDataType.TIMESTAMPWITHTIMEZONE);

  public static final String PENDING = "P";
  public static final String SENT = "S";
  public static final String PARKED = "X";

  private OutboxTable() {}

  private static <T> Field<T> f(String name, org.jooq.DataType<T> type) {
    Name n = DSL.name(name);
    return DSL.field(n, type);
  }
}
