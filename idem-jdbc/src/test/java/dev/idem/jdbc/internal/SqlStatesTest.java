package dev.idem.jdbc.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

import dev.idem.jdbc.LockWaits;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.Test;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * How a lock timeout is told apart: the claim's own wait on the key's index (answered "in flight")
 * from a wait of the caller's statements (their failure). The server's answers are built here in
 * PostgreSQL's wire format, because the one without context comes from a race a test cannot
 * provoke at will (a stress run of the statements form saw it about once in 1,400 calls with a
 * 1 ms bound).
 */
@IdemTest(migrate = false)
class SqlStatesTest {
  /** A 55P03 as PostgreSQL sends it, with {@code where} as its context line, or none if null. */
  static DataAccessException lockTimeout(String where) {
    String raw = "SERROR\0C55P03\0Mcanceling statement due to lock timeout\0" + (where == null ? "" : "W" + where + "\0");
    return new DataAccessException("idem executor: lock timeout", new PSQLException(new ServerErrorMessage(raw)));
  }

  @Test
  void aLockTimeoutWhileInsertingIntoTheKeysIndexIsTheClaimsWait() {
    assertThat(SqlStates.isLockTimeoutOn(lockTimeout("while inserting index tuple (0,7) in relation \"idem_keys_pkey\""),
        "idem_keys_pkey")).isTrue();
  }

  @Test
  void aLockTimeoutWithNoContextIsTheClaimsWaitEndingAsTheTimerFired() {
    assertThat(SqlStates.isLockTimeoutOn(lockTimeout(null), "idem_keys_pkey")).isTrue();
  }

  @Test
  void aLockTimeoutOnAnotherRelationIsTheCallers() {
    assertThat(SqlStates.isLockTimeoutOn(lockTimeout("while updating tuple (0,1) in relation \"accounts\""),
        "idem_keys_pkey")).isFalse();
  }

  @Test
  void anotherErrorIsNoLockTimeout() {
    DataAccessException unique = new DataAccessException("x", new PSQLException(
        new ServerErrorMessage("SERROR\0C23505\0Mduplicate key value violates unique constraint\0")));
    assertThat(SqlStates.isLockTimeoutOn(unique, "idem_keys_pkey")).isFalse();
  }

  /**
   * A session the server ended for sitting idle (57P05, idle_session_timeout) is a connection
   * failure, like one ended by pg_terminate_backend: an external effect's record that meets it is
   * made again on a fresh connection rather than left in flight for the lease. MariaDB: a session
   * past its wait_timeout, which the server closes, the same.
   */
  @Test
  void aSessionEndedForIdlingIsAConnectionFailure(TestDatabase db) throws Exception {
    try (Connection c = db.connect()) {
      int session = LockWaits.pid(c);
      boolean maria = db.vendor() == TestDatabase.Vendor.MARIADB;
      try (Statement st = c.createStatement()) {
        st.execute(maria ? "SET SESSION wait_timeout = 1" : "set idle_session_timeout = '100ms'");
      }
      Poll.until("the server ended the idle session", () -> db.count(maria
          ? "SELECT count(*) FROM information_schema.processlist WHERE id = ?"
          : "SELECT count(*) FROM pg_stat_activity WHERE pid = ?", session) == 0);
      SQLException e = catchThrowableOfType(() -> {
        try (Statement st = c.createStatement()) {
          st.execute("select 1");
        }
      }, SQLException.class);
      assertThat((Object) e).as("the server ended the idle session").isNotNull();
      if (!maria) {
        assertThat(e.getSQLState()).as("what the server said: " + e.getMessage()).isEqualTo("57P05");
      }
      assertThat(SqlStates.isConnectionFailure(e)).as(e + " (SQLSTATE " + e.getSQLState() + ", " + e.getErrorCode() + ")").isTrue();
    }
  }

  /** MariaDB: a session ended with KILL CONNECTION (as FaultyDataSource and an operator do) is a connection failure. */
  @Test
  void onMariaDbAKilledSessionIsAConnectionFailure(TestDatabase db) throws Exception {
    org.junit.jupiter.api.Assumptions.assumeTrue(db.vendor() == TestDatabase.Vendor.MARIADB, "MariaDB's KILL CONNECTION");
    try (Connection c = db.connect(); Connection killer = db.connect()) {
      int session = LockWaits.pid(c);
      try (Statement st = killer.createStatement()) {
        st.execute("KILL CONNECTION " + session);
      }
      SQLException e = catchThrowableOfType(() -> {
        try (Statement st = c.createStatement()) {
          st.execute("select 1");
        }
      }, SQLException.class);
      assertThat((Object) e).as("the server ended the session").isNotNull();
      assertThat(SqlStates.isConnectionFailure(e)).as(e + " (SQLSTATE " + e.getSQLState() + ", " + e.getErrorCode() + ")").isTrue();
    }
  }
}
