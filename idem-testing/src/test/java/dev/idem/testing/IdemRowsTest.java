package dev.idem.testing;

import static org.assertj.core.api.Assertions.assertThat;

import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link IdemRows} ages a key's rows past their window on the run's database, keeping the window's
 * length, and leaves other keys alone; read back from the tables. The tables are made here with the
 * columns IdemRows touches, as idem's migrations make them (this module cannot run those: they are
 * idem-jdbc's), in the default schema: {@code idem} on PostgreSQL, the test database on MariaDB.
 */
@IdemTest(migrate = false, poolSize = 2)
class IdemRowsTest {
  private static TestDatabase db;
  private static IdemRows rows;
  private static boolean mariadb;

  @BeforeAll
  static void tables(TestDatabase database, DataSource pool) {
    db = database;
    mariadb = db.vendor() == TestDatabase.Vendor.MARIADB;
    if (mariadb) {
      db.execute("CREATE TABLE idem_keys (`key` varchar(512) NOT NULL PRIMARY KEY, created_at DATETIME(6) NOT NULL,"
          + " completed_at DATETIME(6), expires_at DATETIME(6) NOT NULL);"
          + " CREATE TABLE idem_inbox (message_id varchar(512) NOT NULL PRIMARY KEY, received_at DATETIME(6) NOT NULL,"
          + " expires_at DATETIME(6) NOT NULL);"
          + " INSERT INTO idem_keys VALUES ('k1', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR),"
          + " ('k2', UTC_TIMESTAMP(6), NULL, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR);"
          + " INSERT INTO idem_inbox VALUES ('m1', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)");
    } else {
      db.execute("CREATE SCHEMA idem; CREATE TABLE idem.idem_keys (key text PRIMARY KEY, created_at timestamptz NOT NULL,"
          + " completed_at timestamptz, expires_at timestamptz NOT NULL);"
          + " CREATE TABLE idem.idem_inbox (message_id text PRIMARY KEY, received_at timestamptz NOT NULL, expires_at timestamptz NOT NULL);"
          + " INSERT INTO idem.idem_keys VALUES ('k1', now(), now(), now() + interval '1 hour'), ('k2', now(), NULL, now() + interval '1 hour');"
          + " INSERT INTO idem.idem_inbox VALUES ('m1', now(), now() + interval '1 hour')");
    }
    rows = new IdemRows(pool, null);
  }

  /** The window's length of {@code key}'s row, in whole seconds. */
  private static long windowSeconds(String table, String column, String keyColumn, String key) {
    return db.count(mariadb
        ? "SELECT TIMESTAMPDIFF(SECOND, " + column + ", expires_at) FROM " + table + " WHERE " + keyColumn + " = ?"
        : "SELECT round(extract(epoch FROM expires_at - " + column + ")) FROM " + table + " WHERE " + keyColumn + " = ?", key);
  }

  @Test
  void agesTheKeysRowsPastTheirWindow_keepingItsLength_andNoOtherKeys() {
    rows.check();
    String keyColumn = mariadb ? "`key`" : "key";
    assertThat(windowSeconds("idem_keys", "created_at", keyColumn, "k1")).isEqualTo(3600);
    assertThat(rows.pastWindow("k1", "m1")).isZero();

    assertThat(rows.age("k1", "m1")).isEqualTo(2);

    assertThat(rows.pastWindow("k1", "m1")).isEqualTo(2);
    assertThat(rows.pastWindow("k2")).isZero();
    assertThat(windowSeconds("idem_keys", "created_at", keyColumn, "k1")).isEqualTo(3600);
    assertThat(windowSeconds("idem_keys", "completed_at", keyColumn, "k1")).isEqualTo(3600);
    assertThat(windowSeconds("idem_inbox", "received_at", "message_id", "m1")).isEqualTo(3600);
    assertThat(rows.age("k1", "m1")).as("rows past their window are left as they are").isZero();
    assertThat(rows.age()).isZero();
  }
}
