package dev.idem.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Event;
import org.junit.platform.testkit.engine.Events;

/**
 * {@link IdemTest#vendors()} and {@link IdemTest#logicalReplication()} as a run on either database
 * meets them: the classes below run through JUnit's own engine, and each is either run on a
 * database of the run's vendor or disabled with its reason, having made no database.
 */
class IdemTestVendorsTest {
  private static final TestDatabase.Vendor RUNNING = TestDatabase.configuredVendor();
  /** What the classes below saw when they ran: their database's vendor and name. */
  static final List<String> ran = new CopyOnWriteArrayList<>();

  @IdemTest(migrate = false, vendors = TestDatabase.Vendor.POSTGRESQL, vendorsReason = "pg_terminate_backend")
  static class PostgresqlOnly {
    @BeforeAll
    static void start(TestDatabase db) {
      ran.add("PostgresqlOnly on " + db.vendor());
    }

    @Test
    void runs(TestDatabase db) {
      assertThat(db.vendor()).isEqualTo(TestDatabase.Vendor.POSTGRESQL);
    }
  }

  @IdemTest(migrate = false, vendors = TestDatabase.Vendor.MARIADB)
  static class MariadbOnly {
    @BeforeAll
    static void start(TestDatabase db) {
      ran.add("MariadbOnly on " + db.vendor());
    }

    @Test
    void runs(TestDatabase db) {
      assertThat(db.vendor()).isEqualTo(TestDatabase.Vendor.MARIADB);
    }
  }

  @IdemTest(migrate = false, sql = "CREATE TABLE t (v int NOT NULL); INSERT INTO t VALUES (1)")
  static class Either {
    @Test
    void runsOnTheRunsDatabase_withItsSqlRunAsSeveralStatements(TestDatabase db) {
      ran.add("Either on " + db.vendor());
      assertThat(db.vendor()).isEqualTo(RUNNING);
      assertThat(db.count("SELECT count(*) FROM t")).isEqualTo(1);
    }
  }

  @IdemTest(migrate = false, logicalReplication = true)
  static class LogicalReplication {
    @Test
    void runs() {
      ran.add("LogicalReplication");
    }
  }

  @IdemTest(migrate = false, vendors = {})
  static class NoVendor {
    @Test
    void runs() {
      ran.add("NoVendor");
    }
  }

  private static Events containers(Class<?> test) {
    return EngineTestKit.engine("junit-jupiter").selectors(selectClass(test)).execute().containerEvents();
  }

  private static String skipReason(Events events) {
    return events.skipped().stream().map(Event::getPayload).findFirst().orElseThrow().map(Object::toString).orElseThrow();
  }

  @Test
  void aClassForOneDatabase_runsThere_andIsDisabledWithItsReasonOnTheOther() {
    ran.clear();
    Events pg = containers(PostgresqlOnly.class);
    Events maria = containers(MariadbOnly.class);
    if (RUNNING == TestDatabase.Vendor.POSTGRESQL) {
      assertThat(pg.skipped().count()).isZero();
      assertThat(pg.failed().count()).isZero();
      assertThat(skipReason(maria)).isEqualTo("MariaDB only");
      assertThat(ran).containsExactly("PostgresqlOnly on PostgreSQL");
    } else {
      assertThat(skipReason(pg)).isEqualTo("PostgreSQL only: pg_terminate_backend");
      assertThat(maria.skipped().count()).isZero();
      assertThat(maria.failed().count()).isZero();
      assertThat(ran).as("the disabled class made no database: its @BeforeAll never ran").containsExactly("MariadbOnly on MariaDB");
    }
  }

  @Test
  void aClassForEither_runsOnTheRunsDatabase() {
    ran.clear();
    Events either = EngineTestKit.engine("junit-jupiter").selectors(selectClass(Either.class)).execute().testEvents();
    assertThat(either.succeeded().count()).isEqualTo(1);
    assertThat(ran).containsExactly("Either on " + RUNNING);
  }

  /** Logical replication is PostgreSQL's: such a class is PostgreSQL only whatever vendors says (run on MariaDB only, as on PostgreSQL it would start a server with wal_level=logical). */
  @Test
  void logicalReplication_isPostgresqlOnly() {
    if (RUNNING != TestDatabase.Vendor.MARIADB) {
      return;
    }
    ran.clear();
    assertThat(skipReason(containers(LogicalReplication.class))).isEqualTo("PostgreSQL only: logical replication (wal_level=logical)");
    assertThat(ran).isEmpty();
  }

  @Test
  void noVendorAtAll_isAMistakeReportedAsSuch() {
    ran.clear();
    Events events = containers(NoVendor.class);
    assertThat(events.failed().stream().map(e -> e.getPayload().orElseThrow().toString()).findFirst().orElseThrow())
        .contains("@IdemTest(vendors = {}): name at least one database the class runs on");
    assertThat(ran).isEmpty();
  }
}
