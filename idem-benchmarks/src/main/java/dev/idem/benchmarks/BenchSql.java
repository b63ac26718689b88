package dev.idem.benchmarks;

import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.List;
import java.util.Locale;

/**
 * The benchmarks' own SQL where PostgreSQL and MariaDB differ: the tables of the effect, of the
 * yardstick, of the hand-rolled guards and of the peers, their seed rows, and idem's table names.
 * idem's own tables come from its migrations, per database; the guards' SQL is theirs. Each form
 * is what a user of that database would write: on MariaDB {@code INSERT IGNORE} for {@code ON
 * CONFLICT DO NOTHING} (Connector/J reports found rows, so {@code ON DUPLICATE KEY UPDATE k = k}
 * would say 1 for a key already there), {@code AUTO_INCREMENT} for {@code bigserial}, binary
 * collations where PostgreSQL's text compares exactly, UTC {@code DATETIME(6)} for {@code
 * timestamptz}, and the peers' DDL as each ships it for MySQL.
 */
enum BenchSql {
  POSTGRESQL,
  MARIADB;

  /** Apache Camel 4.22's own DDL for its table (JdbcMessageIdRepository.DEFAULT_CREATE_STRING), the only one Camel ships, for every database. */
  static final String CAMEL_DDL = "CREATE TABLE CAMEL_MESSAGEPROCESSED (processorName VARCHAR(255), messageId VARCHAR(100), "
      + "createdAt TIMESTAMP, PRIMARY KEY (processorName, messageId))";
  /** Spring Integration 7.1's org/springframework/integration/jdbc/schema-postgresql.sql, the metadata store's table. */
  static final String SPRING_INTEGRATION_DDL_POSTGRESQL = "CREATE TABLE INT_METADATA_STORE (METADATA_KEY VARCHAR(255) NOT NULL, "
      + "METADATA_VALUE VARCHAR(4000), REGION VARCHAR(100) NOT NULL, "
      + "constraint INT_METADATA_STORE_PK primary key (METADATA_KEY, REGION))";
  /** Spring Integration 7.1's org/springframework/integration/jdbc/schema-mysql.sql (it ships none named for MariaDB), the metadata store's table. */
  static final String SPRING_INTEGRATION_DDL_MYSQL = "CREATE TABLE INT_METADATA_STORE (METADATA_KEY VARCHAR(255) NOT NULL, "
      + "METADATA_VALUE VARCHAR(4000), REGION VARCHAR(100) NOT NULL, "
      + "constraint INT_METADATA_STORE_PK primary key (METADATA_KEY, REGION)) ENGINE=InnoDB";

  /** The database {@code db} is on. */
  static BenchSql of(TestDatabase db) {
    return db.vendor() == TestDatabase.Vendor.MARIADB ? MARIADB : POSTGRESQL;
  }

  /** The database {@code c} is connected to, as its driver names it (no round trip). */
  static BenchSql of(Connection c) throws SQLException {
    String product = c.getMetaData().getDatabaseProductName().toLowerCase(Locale.ROOT);
    if (product.contains("postgres")) {
      return POSTGRESQL;
    }
    if (product.contains("mariadb") || product.contains("mysql")) {
      return MARIADB;
    }
    throw new IllegalStateException("the benchmarks run on PostgreSQL or MariaDB, not on " + product);
  }

  boolean mariadb() {
    return this == MARIADB;
  }

  /** How the page names the database. */
  @Override
  public String toString() {
    return mariadb() ? "MariaDB" : "PostgreSQL";
  }

  /** idem's table {@code name} as SQL: in schema {@code idem} on PostgreSQL, in the connection's own database on MariaDB. */
  String idem(String name) {
    return mariadb() ? name : "idem." + name;
  }

  /** A table of the effect: {@code (id, <column> text, amount int)}, the id generated. */
  String effectTable(String table, String column) {
    return mariadb()
        ? "CREATE TABLE " + table + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, " + column + " VARCHAR(255) NOT NULL, amount INT NOT NULL)"
            + " ENGINE=InnoDB"
        : "CREATE TABLE " + table + " (id bigserial PRIMARY KEY, " + column + " text NOT NULL, amount int NOT NULL)";
  }

  /** Rows 1..n of {@code payments} (ids 1..n on a new table): 'seed-i', i. */
  String seedPayments(int n) {
    return mariadb()
        ? "INSERT INTO payments (request, amount) SELECT CONCAT('seed-', seq), seq FROM seq_1_to_" + n
        : "INSERT INTO payments (request, amount) SELECT 'seed-' || i, i FROM generate_series(1, " + n + ") i";
  }

  /** The table a statement given with a repeat would write to. */
  String mustNotRunTable() {
    return mariadb() ? "CREATE TABLE repeat_must_not_run (what TEXT NOT NULL) ENGINE=InnoDB"
        : "CREATE TABLE repeat_must_not_run (what text NOT NULL)";
  }

  /** The hand-rolled guard's key table. */
  String naiveKeysTable() {
    return mariadb() ? "CREATE TABLE naive_keys (k VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY) ENGINE=InnoDB"
        : "CREATE TABLE naive_keys (k text PRIMARY KEY)";
  }

  /** The hand-rolled guard's claim of key {@code ?}: inserts nothing for a key already there. */
  String naiveClaim() {
    return mariadb() ? "INSERT IGNORE INTO naive_keys (k) VALUES (?)" : "INSERT INTO naive_keys (k) VALUES (?) ON CONFLICT DO NOTHING";
  }

  /**
   * The hand-rolled batch's claim of {@code n} keys ({@code ?} each) in one statement: inserts the
   * keys not there yet and returns them ({@code RETURNING k}; MariaDB 10.5+ returns the rows {@code
   * INSERT IGNORE} inserted).
   */
  String naiveClaimBatch(int n) {
    String rows = String.join(", ", java.util.Collections.nCopies(n, "(?)"));
    return mariadb() ? "INSERT IGNORE INTO naive_keys (k) VALUES " + rows + " RETURNING k"
        : "INSERT INTO naive_keys (k) VALUES " + rows + " ON CONFLICT DO NOTHING RETURNING k";
  }

  /**
   * The table of the guard that keeps what a replay needs, with {@code n} rows in it before the
   * statistics (as a key table in service has them).
   */
  List<String> naiveStoredKeysTable(int n) {
    return mariadb()
        ? List.of("CREATE TABLE naive_stored_keys (k VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY,"
                + " fingerprint VARBINARY(32) NOT NULL, result BLOB, expires_at DATETIME(6) NOT NULL, KEY (expires_at)) ENGINE=InnoDB",
            "INSERT INTO naive_stored_keys (k, fingerprint, expires_at) SELECT CONCAT('seed-', seq), x'00',"
                + " UTC_TIMESTAMP(6) + INTERVAL 1 DAY FROM seq_1_to_" + n)
        : List.of("CREATE TABLE naive_stored_keys (k text PRIMARY KEY, fingerprint bytea NOT NULL, result bytea,"
                + " expires_at timestamptz NOT NULL)",
            "CREATE INDEX ON naive_stored_keys (expires_at)",
            "INSERT INTO naive_stored_keys (k, fingerprint, expires_at) SELECT 'seed-' || i, '\\x00', now() + interval '1 day'"
                + " FROM generate_series(1, " + n + ") i");
  }

  /** The stored guard's claim of key {@code ?} with fingerprint {@code ?} and an expiry a day on. */
  String naiveStoredClaim() {
    return mariadb()
        ? "INSERT IGNORE INTO naive_stored_keys (k, fingerprint, expires_at) VALUES (?, ?, UTC_TIMESTAMP(6) + INTERVAL 1 DAY)"
        : "INSERT INTO naive_stored_keys (k, fingerprint, expires_at) VALUES (?, ?, now() + interval '1 day') ON CONFLICT DO NOTHING";
  }

  /** Spring Integration's table, from the schema file it ships for this database. */
  String springIntegrationTable() {
    return mariadb() ? SPRING_INTEGRATION_DDL_MYSQL : SPRING_INTEGRATION_DDL_POSTGRESQL;
  }
}
