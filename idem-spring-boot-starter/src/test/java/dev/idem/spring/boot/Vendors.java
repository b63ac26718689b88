package dev.idem.spring.boot;

import dev.idem.testing.TestDatabase;
import java.time.Duration;

/**
 * The starter's tests' SQL where PostgreSQL's and MariaDB's differ: the tests run on the database
 * the run chose ({@link TestDatabase#newDatabase}), and name idem's {@code key} column as {@code
 * idem_keys.key} (a word MariaDB reserves, accepted after a table name on both).
 */
final class Vendors {
  private Vendors() {}

  static boolean mariadb(TestDatabase db) {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  /** {@code postgresql} on PostgreSQL, {@code mariadb} on MariaDB. */
  static String sql(TestDatabase db, String postgresql, String mariadb) {
    return mariadb(db) ? mariadb : postgresql;
  }

  /** A bigint id the database fills in, as the table's primary key. */
  static String autoId(TestDatabase db) {
    return sql(db, "id bigserial PRIMARY KEY", "id BIGINT AUTO_INCREMENT PRIMARY KEY");
  }

  /** A condition on an idem_keys row: its window (expires_at - created_at) is {@code window}. */
  static String windowIs(TestDatabase db, Duration window) {
    return sql(db, "expires_at - created_at = interval '" + window.toSeconds() + " seconds'",
        // MariaDB: DATETIME(6) columns, no interval type
        "TIMESTAMPDIFF(MICROSECOND, created_at, expires_at) = " + window.toNanos() / 1000);
  }

  /**
   * The SQL that fails the transaction it runs in with SQLSTATE 40001, as a serialization failure
   * (PostgreSQL) or a deadlock (MariaDB, error 1213) does, and that idem retries.
   */
  static String serializationFailure(TestDatabase db, String message) {
    return sql(db, "DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = '" + message + "'; END $$",
        "SIGNAL SQLSTATE '40001' SET MESSAGE_TEXT = '" + message + "', MYSQL_ERRNO = 1213");
  }

  /**
   * How many of idem's tables {@code db} has where the starter puts them by default: the schema
   * {@code idem} on PostgreSQL (counted as the schema itself, which idem's migrations create), the
   * database itself on MariaDB.
   */
  static long idemTables(TestDatabase db) {
    return db.count(sql(db, "SELECT count(*) FROM pg_namespace WHERE nspname = 'idem'",
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'idem\\_%'"));
  }
}
