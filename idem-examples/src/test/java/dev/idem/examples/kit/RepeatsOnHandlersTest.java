package dev.idem.examples.kit;

import static dev.idem.testing.Delivery.CONCURRENT;
import static dev.idem.testing.Delivery.KILLED_AFTER_COMMIT;
import static dev.idem.testing.Delivery.KILLED_BEFORE_COMMIT;
import static dev.idem.testing.Delivery.OUT_OF_ORDER;
import static dev.idem.testing.Delivery.PAST_WINDOW;
import static dev.idem.testing.Delivery.REPLY_LOST;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.testing.Delivery;
import dev.idem.testing.Effects;
import dev.idem.testing.FaultyDataSource;
import dev.idem.testing.IdemTest;
import dev.idem.testing.RepeatReport;
import dev.idem.testing.Repeats;
import dev.idem.testing.Targets;
import dev.idem.testing.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The kit against message handlers called in this JVM: an inbox handler that writes its effect
 * outside the inbox's transaction must fail the killing trials (naming the commit killed), the
 * one writing on the inbox's transaction must pass everything; a sequence handler must pass
 * {@link Delivery#OUT_OF_ORDER} and blind writes fail it. Every count is checked in the database.
 */
@IdemTest(poolSize = 24)
class RepeatsOnHandlersTest {
  private static KitService service;

  @BeforeAll
  static void start(TestDatabase db, DataSource pool, FaultyDataSource faulty) throws Exception {
    KitService.createTables(db);
    service = new KitService(db, pool, faulty, Idem.DEFAULT_ANSWERS_FROM_MEMORY);
  }

  @AfterAll
  static void stop() {
    service.close();
  }

  private static Repeats charges(Targets.Handler handler) {
    return Repeats.of(Effects.in(service.pool, "charges", "order_id")).target(Targets.handler(handler)).faults(service.faulty)
        .deliver(CONCURRENT, REPLY_LOST, KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT);
  }

  private static long chargeRows(RepeatReport.Trial t) {
    return service.rows("charges", "order_id", t.intent());
  }

  private static RepeatReport.Trial trial(RepeatReport report, Delivery d, int commit) {
    return report.trials().stream().filter(t -> t.delivery() == d && t.variant().startsWith("writing commit " + commit + " "))
        .findFirst().orElseThrow();
  }

  @Test
  void handlerWritingOutsideTheInboxTransaction_failsWhereAKillSplitsTheEffectFromTheClaim() {
    RepeatReport report = charges(copy -> service.chargeOutsideIdem(copy.key(), copy.intent())).run();
    System.out.println(report);

    // A clean delivery commits twice: the charge on the handler's own connection, then the
    // inbox's claim. Killing the charge's commit after it committed, or the claim's before, leaves
    // a charge with no claim: the redelivery charges again.
    assertThat(report.trials()).filteredOn(t -> t.delivery().name().startsWith("KILLED"))
        .extracting(RepeatReport.Trial::variant)
        .containsExactly("a clean delivery, nothing killed", "writing commit 1 of 2", "writing commit 2 of 2",
            "writing commit 1 of 2", "writing commit 2 of 2");
    RepeatReport.Trial claimKilledBefore = trial(report, KILLED_BEFORE_COMMIT, 2);
    RepeatReport.Trial chargeKilledAfter = trial(report, KILLED_AFTER_COMMIT, 1);
    assertThat(report.failures()).containsExactly(claimKilledBefore, chargeKilledAfter);
    for (RepeatReport.Trial t : report.trials()) {
      assertThat(chargeRows(t)).as(t.delivery() + " " + t.variant()).isEqualTo(t.effects())
          .isEqualTo(t == claimKilledBefore || t == chargeKilledAfter ? 2 : 1);
    }
    String key = chargeKilledAfter.steps().get(0).key();
    // The driver's words for the dead connection: pgjdbc's depend on whether it read the FATAL
    // message first; MariaDB's driver meets a closed socket, or reads the kill's own error.
    boolean pg = !KitService.mariadb(service.db);
    String threw = pg ? "PSQLException: [^\n]*\\(SQLState (57P01|08006)\\)"
        : "SQL(NonTransient|Transient)ConnectionException: [^\n]*\\(SQLState (08000|08S01|70100)\\)";
    String killed = pg ? "\\(backend \\d+ terminated\\)" : "\\(connection \\d+ killed\\)";
    assertThatThrownBy(report::assertOneEffectPerIntent)
        .hasMessageStartingWith("one effect per intent in charges.order_id: 2 of 7 trials failed\n")
        .hasMessageContaining("FAIL KILLED_BEFORE_COMMIT (writing commit 2 of 2), intent " + claimKilledBefore.intent()
            + ": 2 effects, want 1")
        .hasMessageContaining("FAIL KILLED_AFTER_COMMIT (writing commit 1 of 2), intent " + chargeKilledAfter.intent()
            + ": 2 effects, want 1\n       copy 1, key " + key + ": threw ")
        .hasMessageMatching("(?s).*copy 1, key " + key + ": threw " + threw + ", not acknowledged"
            + " → acknowledged → 2 effects ← 1 extra\n         writing commit 1 \\(auto-commit 'INSERT INTO charges \\(order_id\\)"
            + " VALUES \\(\\?\\)' on connection #\\d+\\) killed after it committed " + killed + "\n.*");
  }

  @Test
  void handlerWritingOnTheInboxTransaction_oneEffectPerIntentWhateverIsRepeatedOrKilled() {
    RepeatReport report = charges(copy -> service.charge(copy.key(), copy.intent())).run();
    System.out.println(report);

    report.assertOneEffectPerIntent();
    assertThat(report.trials()).extracting(t -> t.delivery() + " " + t.variant()).containsExactly(
        "CONCURRENT ", "REPLY_LOST ", "KILLED_BEFORE_COMMIT a clean delivery, nothing killed",
        "KILLED_BEFORE_COMMIT writing commit 1 of 1", "KILLED_AFTER_COMMIT writing commit 1 of 1");
    assertThat(report.trials()).allSatisfy(t -> assertThat(chargeRows(t)).isEqualTo(1));
  }

  @Test
  void pastTheWindowAnsweredFromTheInboxsMemory_theReportSaysTheRowWasNotClaimedAgain() {
    // This service's Idem answers repeats from memory for 30 s: a row aged by hand is not seen.
    RepeatReport report = Repeats.of(Effects.in(service.pool, "charges", "order_id"))
        .target(Targets.handler(copy -> service.charge(copy.key(), copy.intent()))).deliver(PAST_WINDOW).run();
    RepeatReport.Trial t = report.trials().get(0);
    assertThat(chargeRows(t)).isEqualTo(1);
    // idem's times on MariaDB are UTC DATETIMEs, compared with the database's UTC clock
    String now = KitService.mariadb(service.db) ? "UTC_TIMESTAMP(6)" : "now()";
    assertThat(service.db.count("SELECT count(*) FROM idem_inbox WHERE message_id = ? AND expires_at < " + now,
        t.steps().get(1).key())).isEqualTo(1);
    assertThat(report.toString()).contains("--   PAST_WINDOW, intent " + t.intent() + ": 1 effect, outside idem's guarantee,"
        + " not asserted: past the window a repeat is new: size the window to the slowest path")
        .contains("sent after idem's row for the key was aged past the window; idem's row was not claimed again: the copy"
            + " was answered before idem's table (from a guard's memory: build the service's Idem with"
            + " answersFromMemory(Duration.ZERO) to test the window) or refused by the service");
  }

  @Test
  void aHandlerThatNeverReturns_isAbandonedAtTheTimeoutAndReported() {
    CountDownLatch never = new CountDownLatch(1);
    try {
      RepeatReport report = Repeats.of(Effects.in(service.pool, "charges", "order_id"))
          .target(Targets.handler(copy -> never.await())).deliver(REPLY_LOST).timeout(Duration.ofMillis(300)).run();
      RepeatReport.Trial t = report.trials().get(0);
      assertThat(chargeRows(t)).isZero();
      assertThatThrownBy(report::assertOneEffectPerIntent)
          .hasMessageContaining("FAIL REPLY_LOST, intent " + t.intent() + ": 0 effects, want 1 (the effect never happened: it was"
              + " lost, or the request does not carry copy.intent() to charges.order_id)")
          .hasMessageContaining("copy 2, key " + t.steps().get(1).key() + ": no answer within 300 ms, abandoned → 0 effects");
    } finally {
      never.countDown();
    }
  }

  @Test
  void sequenceHandler_outOfOrderAndRepeated_eachMessageOnceAndTheNewestLast() {
    RepeatReport report = Repeats.of(Effects.in(service.pool, "price_events", "sku").sequencedBy("seq"))
        .target(Targets.handler(copy -> service.applyPrice(copy.intent(), copy.sequence())))
        .deliver(OUT_OF_ORDER).messages(4).run();
    System.out.println(report);

    report.assertOneEffectPerIntent();
    RepeatReport.Trial t = report.trials().get(0);
    assertThat(t.steps()).hasSize(9); // 1..4 twice, and 1 once more, late
    assertThat(service.db.count("SELECT count(*) - count(DISTINCT seq) FROM price_events WHERE sku = ?", t.intent())).isZero();
    assertThat(service.db.count("SELECT max(seq) FROM price_events WHERE sku = ?", t.intent())).isEqualTo(4);
  }

  @Test
  void blindWrites_outOfOrder_failNamingTheCopyThatMovedItBackOrAppliedTwice() {
    RepeatReport overwritten = Repeats.of(Effects.in(service.pool, "prices", "sku").sequencedBy("seq"))
        .target(Targets.handler(copy -> service.setPriceBlindly(copy.intent(), copy.sequence())))
        .deliver(OUT_OF_ORDER).run();
    RepeatReport.Trial t = overwritten.trials().get(0);
    assertThat(service.db.count("SELECT seq FROM prices WHERE sku = ?", t.intent())).isEqualTo(1);
    List<RepeatReport.Step> steps = t.steps();
    assertThat(steps.get(steps.size() - 1).copy()).isEqualTo("copy 7 (message 1)");
    assertThatThrownBy(overwritten::assertOneEffectPerIntent)
        .hasMessageContaining("FAIL OUT_OF_ORDER (messages 1..3 in the order ")
        .hasMessageContaining("intent " + t.intent() + ": ends at message 1, not 3: a late message moved it back")
        .hasMessageContaining("copy 7 (message 1), key " + steps.get(6).key() + ": acknowledged → 1 effect\n"
            + "         moved the intent back from message ");

    RepeatReport repeated = Repeats.of(Effects.in(service.pool, "price_events", "sku").sequencedBy("seq"))
        .target(Targets.handler(copy -> service.recordPriceBlindly(copy.intent(), copy.sequence())))
        .deliver(OUT_OF_ORDER).run();
    RepeatReport.Trial r = repeated.trials().get(0);
    assertThat(service.db.count("SELECT count(*) FROM price_events WHERE sku = ?", r.intent())).isEqualTo(7);
    assertThatThrownBy(repeated::assertOneEffectPerIntent)
        .hasMessageContaining("intent " + r.intent() + ": message 1 applied 3 times; message 2 applied twice; message 3 applied twice");
    System.out.println(overwritten + "\n" + repeated);
  }
}
