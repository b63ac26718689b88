package dev.idem.examples.kit;

import static dev.idem.testing.Delivery.CONCURRENT;
import static dev.idem.testing.Delivery.FRESH_KEY;
import static dev.idem.testing.Delivery.KILLED_AFTER_COMMIT;
import static dev.idem.testing.Delivery.KILLED_BEFORE_COMMIT;
import static dev.idem.testing.Delivery.PAST_WINDOW;
import static dev.idem.testing.Delivery.REPLY_LOST;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.testing.Delivery;
import dev.idem.testing.Effects;
import dev.idem.testing.FaultyDataSource;
import dev.idem.testing.IdemTest;
import dev.idem.testing.RepeatReport;
import dev.idem.testing.Repeats;
import dev.idem.testing.Target;
import dev.idem.testing.Targets;
import dev.idem.testing.TestDatabase;
import java.net.http.HttpRequest;
import java.time.Duration;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The kit against an HTTP endpoint on a real port: it must fail the endpoint that ignores the key
 * (naming the duplicate and the copy that made it), pass the one guarded by idem's executor under
 * every delivery within the guarantee, and label what a fresh key does as outside it. Every count
 * the kit reports is checked against the database.
 */
@IdemTest(poolSize = 24)
class RepeatsOverHttpTest {
  static final String CLEAN = "a clean delivery, nothing killed";
  private static KitService service;

  @BeforeAll
  static void start(TestDatabase db, DataSource pool, FaultyDataSource faulty) throws Exception {
    KitService.createTables(db);
    // answersFromMemory zero: PAST_WINDOW ages idem's rows by hand, which an answer from memory would not see.
    service = new KitService(db, pool, faulty, Duration.ZERO);
  }

  @AfterAll
  static void stop() {
    service.close();
  }

  private static Target post(String path) {
    return Targets.http(copy -> HttpRequest.newBuilder(service.uri(path))
        .header("Idempotency-Key", copy.key())
        .header("Content-Type", "application/x-www-form-urlencoded")
        .POST(HttpRequest.BodyPublishers.ofString("order=" + copy.intent())).build());
  }

  private static Repeats payments(String path) {
    return Repeats.of(Effects.in(service.pool, "payments", "order_id")).target(post(path)).faults(service.faulty);
  }

  /** The trial of {@code d}, the only one besides the clean delivery a killing delivery starts with. */
  private static RepeatReport.Trial trial(RepeatReport report, Delivery d) {
    assertThat(report.trials()).filteredOn(t -> t.delivery() == d && !t.variant().equals(CLEAN)).hasSize(1);
    return report.trials().stream().filter(t -> t.delivery() == d && !t.variant().equals(CLEAN)).findFirst().orElseThrow();
  }

  private static long paymentRows(RepeatReport.Trial t) {
    return service.rows("payments", "order_id", t.intent());
  }

  @Test
  void unguardedEndpoint_concurrentAndLostReply_failNamingTheCopyThatMadeTheDuplicate() {
    RepeatReport report = payments("/unguarded").deliver(CONCURRENT, REPLY_LOST).run();

    RepeatReport.Trial concurrent = trial(report, CONCURRENT);
    RepeatReport.Trial replyLost = trial(report, REPLY_LOST);
    assertThat(paymentRows(concurrent)).isEqualTo(8).isEqualTo(concurrent.effects());
    assertThat(paymentRows(replyLost)).isEqualTo(2).isEqualTo(replyLost.effects());
    assertThat(report.failures()).containsExactly(concurrent, replyLost);
    assertThatThrownBy(report::assertOneEffectPerIntent)
        .isInstanceOf(AssertionError.class)
        .hasMessageStartingWith("one effect per intent in payments.order_id: 2 of 2 trials failed")
        .hasMessageContaining("FAIL CONCURRENT, intent " + concurrent.intent() + ": 8 effects, want 1")
        .hasMessageContaining("8 copies at once, key " + concurrent.steps().get(0).key() + ": 201 ×8 → 8 effects ← 7 extra")
        .hasMessageContaining("FAIL REPLY_LOST, intent " + replyLost.intent() + ": 2 effects, want 1")
        .hasMessageContaining("copy 1, key " + replyLost.steps().get(0).key() + ": 201, reply discarded → 1 effect\n")
        .hasMessageContaining("copy 2, key " + replyLost.steps().get(0).key() + ": 201 → 2 effects ← 1 extra");
    System.out.println(report);
  }

  @Test
  void guardedEndpoint_everyDeliveryWithinTheGuarantee_oneEffectPerIntent() {
    RepeatReport report = payments("/guarded")
        .deliver(CONCURRENT, REPLY_LOST, KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT).run();
    System.out.println(report);

    report.assertOneEffectPerIntent();
    assertThat(report.trials()).allSatisfy(t -> {
      assertThat(t.asserted()).isTrue();
      assertThat(paymentRows(t)).as(t.delivery() + " " + t.variant()).isEqualTo(1);
    });
    // The executor's transaction is the only writing commit of a delivery: one trial each, and its
    // backend really was terminated (the copy saw a 500 and was sent again).
    boolean maria = KitService.mariadb(service.db);
    for (Delivery d : new Delivery[] {KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT}) {
      RepeatReport.Trial t = trial(report, d);
      assertThat(t.variant()).isEqualTo("writing commit 1 of 1");
      assertThat(t.steps()).singleElement().satisfies(s -> {
        // idem's executor sends its stored result and COMMIT in one string: that is its commit (on
        // MariaDB a compound statement that finds the claim's row first)
        assertThat(s.note()).matches("writing commit 1 \\('" + (maria ? "begin not atomic .*" : "update \"idem\"\\.\"idem_keys\" set .*")
            + "' ending in COMMIT on connection #\\d+\\) killed "
            + (d == KILLED_AFTER_COMMIT ? "after it committed" : "before it reached the server")
            + (maria ? " \\(connection \\d+ killed\\)" : " \\(backend \\d+ terminated\\)"));
        assertThat(s.outcome()).startsWith("500 ").endsWith(d == KILLED_AFTER_COMMIT ? "→ 201 replayed" : "→ 201");
      });
    }
  }

  @Test
  void guardedEndpoint_freshKeyAndPastTheWindow_twoEffectsLabelledOutsideTheGuarantee() {
    RepeatReport report = payments("/guarded").deliver(FRESH_KEY, PAST_WINDOW).run();
    System.out.println(report);

    report.assertOneEffectPerIntent(); // reported, not asserted
    RepeatReport.Trial fresh = trial(report, FRESH_KEY);
    RepeatReport.Trial past = trial(report, PAST_WINDOW);
    assertThat(paymentRows(fresh)).isEqualTo(2);
    assertThat(paymentRows(past)).isEqualTo(2);
    assertThat(fresh.steps().get(0).key()).isNotEqualTo(fresh.steps().get(1).key());
    assertThat(past.steps().get(1).extra()).isEqualTo(1);
    assertThat(past.steps().get(1).note()).isEqualTo("sent after idem's row for the key was aged past the window");
    assertThat(report.toString())
        .startsWith("one effect per intent in payments.order_id: nothing asserted, 2 outside idem's guarantee, not asserted\n")
        .contains("--   FRESH_KEY, intent " + fresh.intent() + ": 2 effects, outside idem's guarantee, not asserted:"
            + " a retry with a fresh key is a new intent to the server: mint the key once per intent")
        .contains("--   PAST_WINDOW, intent " + past.intent() + ": 2 effects, outside idem's guarantee, not asserted:"
            + " past the window a repeat is new: size the window to the slowest path");
  }

  @Test
  void freshKeyExpectedToLeaveOneEffect_failsWhenOnlyIdemsKeyGuardsTheEndpoint() {
    RepeatReport report = payments("/guarded").deliver(FRESH_KEY)
        .expectOneEffect(FRESH_KEY, "payments are unique by order_id").run();

    RepeatReport.Trial fresh = trial(report, FRESH_KEY);
    assertThat(paymentRows(fresh)).isEqualTo(2);
    assertThatThrownBy(report::assertOneEffectPerIntent)
        .hasMessageContaining("FAIL FRESH_KEY, intent " + fresh.intent() + ": 2 effects, want 1, expected because payments"
            + " are unique by order_id (outside idem's guarantee: a retry with a fresh key is a new intent to the server:"
            + " mint the key once per intent)")
        .hasMessageContaining("copy 2, a fresh key, key " + fresh.steps().get(1).key() + ": 201 → 2 effects ← 1 extra");
  }

  @Test
  void killingWithoutTheFaultyDataSource_isRefusedBeforeAnythingIsSent() {
    Repeats repeats = Repeats.of(Effects.in(service.pool, "payments", "order_id")).target(post("/guarded"))
        .deliver(CONCURRENT, KILLED_AFTER_COMMIT);
    long before = service.db.count("SELECT count(*) FROM payments");
    assertThatThrownBy(repeats::run)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("[KILLED_AFTER_COMMIT] kill the service's transaction at its commit, so the service must run"
            + " on a FaultyDataSource");
    assertThat(service.db.count("SELECT count(*) FROM payments")).isEqualTo(before);
  }

  @Test
  void misconfiguredRuns_areRefusedNamingWhatIsMissing() {
    assertThatThrownBy(() -> payments("/guarded").deliver(Delivery.OUT_OF_ORDER).run())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("OUT_OF_ORDER reads each effect's sequence number: name its column with Effects.in(...).sequencedBy(\"seq\")");
    assertThatThrownBy(() -> payments("/guarded").expectOneEffect(CONCURRENT, "it is guarded"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("CONCURRENT is within idem's guarantee and always asserted; expectOneEffect is for PAST_WINDOW and FRESH_KEY");
    assertThatThrownBy(() -> payments("/guarded").deliver(CONCURRENT).expectOneEffect(FRESH_KEY, "unique by order").run())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("expectOneEffect(FRESH_KEY, ...) but FRESH_KEY is not delivered: add it to deliver(...)");
    assertThatThrownBy(() -> payments("/guarded").deliver(PAST_WINDOW).idemSchema("billing").run())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("PAST_WINDOW ages idem's rows, but schema 'billing' has no table idem_keys: migrate idem's tables"
            + " (IdemFlyway.migrate) or name their schema with idemSchema(...)");
    assertThatThrownBy(() -> Repeats.of(Effects.in(service.pool, "payments", "order_id")).deliver(CONCURRENT).run())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("no target: call target(Targets.http(...))");
  }

  @Test
  void effectsNamingATableOrColumnThatIsNotThere_isRefusedNamingIt() {
    assertThatThrownBy(() -> Effects.in(service.pool, "paymnts", "order_id"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("table paymnts does not exist in database " + service.db.name());
    assertThatThrownBy(() -> Effects.in(service.pool, "payments", "order"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("table payments has no column order; its columns: id, order_id, amount");
    assertThatThrownBy(() -> Effects.in(service.pool, "payments; DROP TABLE payments", "order_id"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("table 'payments; DROP TABLE payments' is not a plain SQL identifier");
    assertThatThrownBy(() -> Effects.in(service.pool, "payments", "order_id").sequencedBy("order_id"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("sequence column order_id of payments is of type " + (KitService.mariadb(service.db) ? "character varying(255)" : "text")
            + "; a sequence number needs smallint, integer or bigint");
  }
}
