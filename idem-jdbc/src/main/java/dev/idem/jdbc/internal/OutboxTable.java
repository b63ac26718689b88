package dev.idem.jdbc.internal;

import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.OffsetDateTime;
import java.util.UUID;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The outbox table and its columns, written against schema "idem" (mapped at render): one
 * definition for the outbox and relay, the re-drive and the operator's view. On MariaDB the id is
 * its text form and the headers JSON arrays (see mariadb/V1__idem.sql): {@link #ID_TEXT}, {@link
 * #HEADER_NAMES_JSON} and {@link #HEADER_VALUES_JSON} are those columns as they are there. Not an API.
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
  /** On MariaDB, the id column as it is there: its text form (CHAR(36)), bound and read as a string. */
  public static final Field<String> ID_TEXT = f("id", SQLDataType.VARCHAR);
  /** On MariaDB, the header names as they are there: a JSON array of strings (LONGTEXT). */
  public static final Field<String> HEADER_NAMES_JSON = f("header_names", SQLDataType.CLOB);
  /** On MariaDB, the header values, as {@link #HEADER_NAMES_JSON}. */
  public static final Field<String> HEADER_VALUES_JSON = f("header_values", SQLDataType.CLOB);
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

  /** Binds {@code id} at {@code index}: a uuid on PostgreSQL, its text on MariaDB ({@code CHAR(36)}). */
  public static void setId(PreparedStatement ps, int index, UUID id, boolean mariadb) throws SQLException {
    if (mariadb) {
      ps.setString(index, id.toString());
    } else {
      ps.setObject(index, id);
    }
  }

  /** Reads the id at {@code index}, as {@link #setId} binds it. */
  public static UUID getId(ResultSet rs, int index, boolean mariadb) throws SQLException {
    return mariadb ? UUID.fromString(rs.getString(index)) : rs.getObject(index, UUID.class);
  }

  private static <T> Field<T> f(String name, org.jooq.DataType<T> type) {
    Name n = DSL.name(name);
    return DSL.field(n, type);
  }
}
