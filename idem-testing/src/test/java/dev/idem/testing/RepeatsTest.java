package dev.idem.testing;

import static dev.idem.testing.Delivery.CONCURRENT;
import static dev.idem.testing.Delivery.KILLED_AFTER_COMMIT;
import static dev.idem.testing.Delivery.KILLED_BEFORE_COMMIT;
import static dev.idem.testing.Delivery.REPLY_LOST;
import static org.assertj.core.api.Assertions.assertThat;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * {@link Repeats} end to end on the run's database (PostgreSQL, or MariaDB): a handler guarded by a
 * table of seen message keys, written in the transaction of its effect, holds one effect per intent
 * through concurrent copies, a lost reply and connections killed before and after each writing
 * commit; one that writes its effect in a transaction of its own is caught by a killing trial.
 * Counted in the table by the kit.
 */
@IdemTest(migrate = false, poolSize = 12, sql = {
    "CREATE TABLE seen (message_key varchar(100) PRIMARY KEY)",
    "CREATE TABLE charges (order_id varchar(100) NOT NULL)"})
class RepeatsTest {

  private static void insert(Connection c, String sql, String value) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, value);
      ps.executeUpdate();
    }
  }

  /** The copy's key recorded with its effect, in one transaction; a key seen already is acknowledged. */
  private static void guarded(FaultyDataSource service, Copy copy, boolean effectInside) throws SQLException {
    try (Connection c = service.getConnection()) {
      c.setAutoCommit(false);
      try {
        insert(c, "INSERT INTO seen VALUES (?)", copy.key());
      } catch (SQLException e) {
        c.rollback();
        if (e.getSQLState() != null && e.getSQLState().startsWith("23")) {
          return; // a repeat: its effect committed with the first copy's key
        }
        throw e;
      }
      if (effectInside) {
        insert(c, "INSERT INTO charges VALUES (?)", copy.intent());
      }
      c.commit();
    }
  }

  @Test
  void aHandlerThatRecordsTheKeyWithItsEffect_oneEffectPerIntent(FaultyDataSource service, DataSource pool) {
    RepeatReport report = Repeats.of(Effects.in(pool, "charges", "order_id"))
        .target(Targets.handler(copy -> guarded(service, copy, true)))
        .faults(service)
        .deliver(CONCURRENT, REPLY_LOST, KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT)
        .run();
    report.assertOneEffectPerIntent();
    // Not vacuous: the one writing commit (key and effect together) was found and killed, each way.
    for (Delivery killing : new Delivery[] {KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT}) {
      assertThat(report.trials()).filteredOn(t -> t.delivery() == killing).extracting(RepeatReport.Trial::variant)
          .contains("writing commit 1 of 1");
    }
  }

  @Test
  void aHandlerWhoseEffectCommitsApart_isCaughtByAKill(FaultyDataSource service, DataSource pool) {
    RepeatReport report = Repeats.of(Effects.in(pool, "charges", "order_id"))
        .target(Targets.handler(copy -> {
          try (Connection c = service.getConnection()) {
            insert(c, "INSERT INTO charges VALUES (?)", copy.intent()); // auto-commit: its own transaction
          }
          guarded(service, copy, false);
        }))
        .faults(service)
        .deliver(KILLED_BEFORE_COMMIT)
        .run();
    // Commit 1 is the effect's, commit 2 the key's: killed before the key commits, the effect stays
    // and the redelivered copy charges again.
    assertThat(report.failures()).extracting(RepeatReport.Trial::variant).anySatisfy(v -> assertThat(v).contains("writing commit 2 of 2"));
    assertThat(report.failures()).allSatisfy(t -> assertThat(t.effects()).isEqualTo(2));
  }
}
