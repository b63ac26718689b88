package dev.idem.testing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.sql.DataSource;

/**
 * Where your service's effect lands, counted per intent: a table of yours and the column holding
 * the intent's business key (the order id of a payment row), read with {@code SELECT count(*)
 * FROM table WHERE keyColumn = ?}. This count is the observable property {@link Repeats} asserts:
 * one row per intent, whatever was repeated on the way.
 *
 * <p>Read through the {@link DataSource} given, in auto-commit; a {@link FaultyDataSource} is read
 * through its target, so the kit's own reads are never counted or killed.
 */
public final class Effects {
  private static final Pattern LENGTH = Pattern.compile("character(?: varying)?\\((\\d+)\\)");
  /**
   * Marks a type read from MariaDB (in PostgreSQL's name): MariaDB converts the intent, a string,
   * to the column's type itself, and has no CAST to most of those names.
   */
  private static final String MARIADB = "mariadb:";

  private final DataSource dataSource;
  private final String table;
  private final String keyColumn;
  private final String keyType;
  private final String sequenceColumn;
  /** How the key column is compared with the intent, a string: PostgreSQL casts it to the column's type. */
  private final String keyEquals;

  private Effects(DataSource dataSource, String table, String keyColumn, String keyType, String sequenceColumn) {
    this.keyEquals = keyType.startsWith(MARIADB) ? keyColumn + " = ?" : keyColumn + " = CAST(? AS " + keyType + ")";
    keyType = keyType.startsWith(MARIADB) ? keyType.substring(MARIADB.length()) : keyType;
    this.dataSource = dataSource;
    this.table = table;
    this.keyColumn = keyColumn;
    this.keyType = keyType;
    this.sequenceColumn = sequenceColumn;
  }

  /**
   * The effects in {@code table} (optionally schema-qualified, e.g. {@code shop.payments}),
   * counted by {@code keyColumn}, read through {@code dataSource}.
   *
   * @throws IllegalArgumentException naming what is wrong: a null argument, a name that is not a
   *     plain identifier, a table the database does not have, a column the table does not have
   *     (listing those it has), or a column of a type the kit cannot make intents for (text, uuid
   *     and integer types it can)
   * @throws IllegalStateException if the database cannot be read
   */
  public static Effects in(DataSource dataSource, String table, String keyColumn) {
    Require.present(dataSource, "dataSource");
    Require.identifier(table, "table");
    Require.identifier(keyColumn, "keyColumn");
    if (keyColumn.contains(".")) {
      throw new IllegalArgumentException("keyColumn '" + keyColumn + "' must be a column name, without its table");
    }
    DataSource reads = dataSource instanceof FaultyDataSource f ? f.target() : dataSource;
    Map<String, String> columns = columns(reads, table);
    String type = columnType(columns, table, keyColumn);
    if (!type.equals("uuid") && !type.equals("text") && !type.startsWith("character") && integerBound(type) == 0) {
      throw new IllegalArgumentException("column " + keyColumn + " of " + table + " is of type " + type
          + ": the kit makes intents for text, character varying, uuid and integer columns");
    }
    return new Effects(reads, table, keyColumn.toLowerCase(Locale.ROOT), columns.get(MARIADB) != null ? MARIADB + type : type, null);
  }

  /**
   * These effects with {@code column} holding each effect's sequence number, for {@link
   * Delivery#OUT_OF_ORDER}: the kit reads it to see that no message applied twice and that the
   * intent ends at its newest message.
   *
   * @throws IllegalArgumentException if the table has no such column, or it is not of an integer
   *     type
   */
  public Effects sequencedBy(String column) {
    Require.identifier(column, "column");
    String type = columnType(columns(dataSource, table), table, column);
    if (integerBound(type) == 0) {
      throw new IllegalArgumentException("sequence column " + column + " of " + table + " is of type " + type
          + "; a sequence number needs smallint, integer or bigint");
    }
    return new Effects(dataSource, table, keyColumn, keyEquals.endsWith("= ?") ? MARIADB + keyType : keyType, column.toLowerCase(Locale.ROOT));
  }

  /** The effect table, as given. */
  public String table() {
    return table;
  }

  /** The column of the intent's business key. */
  public String keyColumn() {
    return keyColumn;
  }

  /** How many rows of the table carry {@code intent} in the key column, now. */
  public long count(String intent) {
    Require.present(intent, "intent");
    String sql = "SELECT count(*) FROM " + table + " WHERE " + keyEquals;
    try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, intent);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    } catch (SQLException e) {
      throw new IllegalStateException("could not count the effects of " + intent + ": " + sql, e);
    }
  }

  /** The sequence numbers of {@code intent}'s rows, in order (a number twice: applied twice). */
  List<Long> sequences(String intent) {
    String sql = "SELECT " + sequenceColumn + " FROM " + table + " WHERE " + keyEquals + " ORDER BY 1";
    try (Connection c = dataSource.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, intent);
      List<Long> seqs = new ArrayList<>();
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          seqs.add(rs.getLong(1));
        }
      }
      return seqs;
    } catch (SQLException e) {
      throw new IllegalStateException("could not read the sequence numbers of " + intent + ": " + sql, e);
    }
  }

  /** Whether {@link #sequencedBy} named the sequence column. */
  boolean sequenced() {
    return sequenceColumn != null;
  }

  String sequenceColumn() {
    return sequenceColumn;
  }

  /** The database the effects are read from (never a {@link FaultyDataSource}). */
  DataSource dataSource() {
    return dataSource;
  }

  /**
   * A business key no row has yet, in the column's type: {@code label-3f9a1c} for text, a random
   * UUID, or a random positive number. Checked fresh by counting.
   */
  String freshIntent(String label) {
    for (int tries = 0; tries < 10; tries++) {
      String intent = candidate(label);
      if (count(intent) == 0) {
        return intent;
      }
    }
    throw new IllegalStateException("could not find a business key with no row in " + this + " in 10 tries");
  }

  private String candidate(String label) {
    ThreadLocalRandom r = ThreadLocalRandom.current();
    if (keyType.equals("uuid")) {
      return UUID.randomUUID().toString();
    }
    long bound = integerBound(keyType);
    if (bound > 0) {
      return Long.toString(1 + r.nextLong(bound - 1));
    }
    String hex = String.format("%06x", r.nextInt(1 << 24));
    String intent = label + "-" + hex;
    Matcher m = LENGTH.matcher(keyType);
    if (m.matches() && intent.length() > Integer.parseInt(m.group(1))) {
      // A column too short for the label: random hex of the column's length.
      StringBuilder random = new StringBuilder();
      while (random.length() < Integer.parseInt(m.group(1))) {
        random.append(Long.toHexString(r.nextLong()));
      }
      intent = random.substring(0, Integer.parseInt(m.group(1)));
    }
    return intent;
  }

  /** The largest value of an integer type the kit draws from; 0 for a type that is not one. */
  private static long integerBound(String type) {
    return switch (type) {
      case "smallint" -> Short.MAX_VALUE;
      case "integer" -> Integer.MAX_VALUE;
      case "bigint" -> 1L << 53;
      default -> 0;
    };
  }

  private static String columnType(Map<String, String> columns, String table, String column) {
    String type = columns.get(column.toLowerCase(Locale.ROOT));
    if (type == null) {
      throw new IllegalArgumentException("table " + table + " has no column " + column + "; its columns: "
          + String.join(", ", columns.keySet().stream().filter(k -> !k.equals(MARIADB)).toList()));
    }
    return type;
  }

  /**
   * The table's columns and their types (PostgreSQL's names), in order; from MariaDB, with a
   * marker entry {@link #MARIADB} as well.
   */
  private static Map<String, String> columns(DataSource dataSource, String table) {
    try (Connection c = dataSource.getConnection()) {
      if (!"PostgreSQL".equalsIgnoreCase(c.getMetaData().getDatabaseProductName())) {
        return mariadbColumns(c, table);
      }
      try (PreparedStatement ps = c.prepareStatement("SELECT to_regclass(?) IS NOT NULL")) {
        ps.setString(1, table);
        try (ResultSet rs = ps.executeQuery()) {
          rs.next();
          if (!rs.getBoolean(1)) {
            throw new IllegalArgumentException("table " + table + " does not exist in database " + c.getCatalog()
                + " (search_path: " + searchPath(c) + ")");
          }
        }
      }
      Map<String, String> columns = new LinkedHashMap<>();
      try (PreparedStatement ps = c.prepareStatement("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute"
          + " WHERE attrelid = to_regclass(?) AND attnum > 0 AND NOT attisdropped ORDER BY attnum")) {
        ps.setString(1, table);
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            columns.put(rs.getString(1), rs.getString(2));
          }
        }
      }
      return columns;
    } catch (SQLException e) {
      throw new IllegalStateException("could not read the columns of " + table, e);
    }
  }

  /**
   * MariaDB's columns of {@code table} ({@code database.table}, or a table of the connection's
   * database), their types named as PostgreSQL names the ones the kit makes intents for: {@code
   * varchar(n)} is {@code character varying(n)}, {@code char(n)} {@code character(n)}, the text
   * types {@code text}, {@code int} {@code integer}; {@code uuid}, {@code smallint} and {@code
   * bigint} as they are.
   */
  private static Map<String, String> mariadbColumns(Connection c, String table) throws SQLException {
    int dot = table.indexOf('.');
    Map<String, String> columns = new LinkedHashMap<>();
    String database = null;
    try (PreparedStatement ps = c.prepareStatement("SELECT column_name, data_type, character_maximum_length, table_schema"
        + " FROM information_schema.columns WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? ORDER BY ordinal_position")) {
      ps.setString(1, dot < 0 ? null : table.substring(0, dot));
      ps.setString(2, table.substring(dot + 1));
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          String type = rs.getString(2).toLowerCase(Locale.ROOT);
          columns.put(rs.getString(1).toLowerCase(Locale.ROOT), switch (type) {
            case "varchar" -> "character varying(" + rs.getLong(3) + ")";
            case "char" -> "character(" + rs.getLong(3) + ")";
            case "tinytext", "mediumtext", "longtext" -> "text";
            case "int", "mediumint" -> "integer";
            default -> type;
          });
          database = rs.getString(4);
        }
      }
    }
    if (columns.isEmpty()) {
      throw new IllegalArgumentException("table " + table + " does not exist in database "
          + (dot < 0 ? c.getCatalog() : table.substring(0, dot)));
    }
    columns.put(MARIADB, database);
    return columns;
  }

  private static String searchPath(Connection c) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement("SHOW search_path"); ResultSet rs = ps.executeQuery()) {
      rs.next();
      return rs.getString(1);
    }
  }

  /** {@code table.keyColumn}, as the report names it. */
  @Override
  public String toString() {
    return table + "." + keyColumn;
  }
}
