package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.testing.Delivery;
import dev.idem.testing.IdemTest;
import dev.idem.testing.RepeatReport;
import dev.idem.testing.TestDatabase;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * {@code --prove}: the lab's payments service under idem's kit. Each report is checked against
 * the payment rows the run left in the database: duplicates exactly where the unguarded report
 * puts them, one row per order for every guarded trial within the guarantee.
 */
@IdemTest(migrate = false) // the proof migrates the database itself, as every run of the lab does
class LabProveTest {

  private static String payments(TestDatabase db) {
    return LabSql.of(db).shop("payments");
  }

  private static long rows(TestDatabase db, String order) {
    return db.count("SELECT count(*) FROM " + payments(db) + " WHERE order_id = ?", order);
  }

  private static long rows(TestDatabase db, String order, String key) {
    return db.count("SELECT count(*) FROM " + payments(db) + " WHERE order_id = ? AND idempotency_key = ?", order, key);
  }

  /**
   * Each copy's rows are the ones its key wrote (the service stores the request's key on the
   * row): the effects the report counts after a copy, and the extra ones it blames on it.
   */
  private static void rowsAsReported(TestDatabase db, RepeatReport.Trial t) {
    assertThat(rows(db, t.intent())).as("rows of %s", t.intent()).isEqualTo(t.effects());
    assertThat(t.steps().stream().mapToLong(RepeatReport.Step::extra).sum()).as("extra rows of %s", t.intent())
        .isEqualTo(Math.max(0, t.effects() - 1));
    List<String> keys = t.steps().stream().map(RepeatReport.Step::key).distinct().toList();
    assertThat(keys.stream().mapToLong(key -> rows(db, t.intent(), key)).sum()).as("rows of %s by its copies' keys", t.intent())
        .isEqualTo(t.effects());
  }

  @Test
  void guardOff_duplicatesWhereTheReportSays_guardOn_onePaymentPerOrder(TestDatabase db) throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    Proof.Reports reports = Proof.run(db, new PrintStream(bytes, true, StandardCharsets.UTF_8));
    String out = bytes.toString(StandardCharsets.UTF_8);
    RepeatReport unguarded = reports.unguarded();
    RepeatReport guarded = reports.guarded();

    // Guard off: every copy that reached the service paid again, and the report says which.
    assertThat(unguarded.trials()).extracting(RepeatReport.Trial::delivery).containsExactly(Delivery.CONCURRENT, Delivery.REPLY_LOST);
    assertThat(unguarded.failures()).isEqualTo(unguarded.trials());
    unguarded.trials().forEach(t -> rowsAsReported(db, t));
    RepeatReport.Trial concurrent = unguarded.trials().get(0);
    RepeatReport.Trial replyLost = unguarded.trials().get(1);
    assertThat(rows(db, concurrent.intent())).isEqualTo(8);
    assertThat(rows(db, replyLost.intent())).isEqualTo(2);
    assertThat(replyLost.steps()).extracting(RepeatReport.Step::extra).containsExactly(0L, 1L); // copy 2 made the duplicate

    // Guard on: one row per order in every trial within the guarantee, the killing ones included.
    assertThat(guarded.failures()).isEmpty();
    assertThat(guarded.trials()).extracting(RepeatReport.Trial::delivery).contains(Delivery.CONCURRENT, Delivery.REPLY_LOST,
        Delivery.KILLED_BEFORE_COMMIT, Delivery.KILLED_AFTER_COMMIT, Delivery.FRESH_KEY);
    guarded.trials().forEach(t -> rowsAsReported(db, t));
    assertThat(guarded.trials()).filteredOn(RepeatReport.Trial::asserted)
        .allSatisfy(t -> assertThat(rows(db, t.intent())).as("%s %s", t.delivery(), t.variant()).isEqualTo(1))
        .extracting(RepeatReport.Trial::delivery).doesNotContain(Delivery.FRESH_KEY);
    // PostgreSQL terminates the backend; MariaDB kills the connection (KILL CONNECTION).
    String killedWhere = db.vendor() == TestDatabase.Vendor.POSTGRESQL ? "terminated)" : " killed)";
    for (Delivery kill : List.of(Delivery.KILLED_BEFORE_COMMIT, Delivery.KILLED_AFTER_COMMIT)) {
      // The backend really was terminated at the commit, and the retry still left one payment.
      assertThat(guarded.trials()).filteredOn(t -> t.delivery() == kill && t.variant().startsWith("writing commit"))
          .isNotEmpty()
          .allSatisfy(t -> assertThat(t.steps()).anySatisfy(s -> assertThat(s.note()).contains("killed").contains(killedWhere)));
    }
    // A fresh key is outside the guarantee: reported, not asserted, and really two payments.
    RepeatReport.Trial fresh = guarded.trials().stream().filter(t -> t.delivery() == Delivery.FRESH_KEY).findFirst().orElseThrow();
    assertThat(fresh.asserted()).isFalse();
    assertThat(rows(db, fresh.intent())).isEqualTo(2);
    // ...and nothing else wrote a payment: every row is one the reports counted.
    assertThat(db.count("SELECT count(*) FROM " + payments(db)))
        .isEqualTo(Stream.concat(unguarded.trials().stream(), guarded.trials().stream()).mapToLong(RepeatReport.Trial::effects).sum());

    // The printed text: a heading and the report of each run, and what to take away.
    assertThat(out)
        .containsSubsequence("-- guard off (no key-table): ", unguarded.toString(), "-- guard on (key-table): ", guarded.toString(),
            "take away: ")
        .contains("FAIL CONCURRENT, intent " + concurrent.intent() + ": 8 effects, want 1")
        .contains("FAIL REPLY_LOST, intent " + replyLost.intent() + ": 2 effects, want 1")
        .contains("ok   CONCURRENT, intent ").contains("ok   REPLY_LOST, intent ")
        .contains("ok   KILLED_BEFORE_COMMIT (writing commit 1 of ").contains("ok   KILLED_AFTER_COMMIT (writing commit 1 of ")
        .contains("--   FRESH_KEY, intent " + fresh.intent() + ": 2 effects, outside idem's guarantee");
  }

  @Test
  void proveIsAnOptionOfItsOwn() throws Exception {
    assertThat(Tour.parse(new String[] {"--prove"}).prove()).isTrue();
    assertThat(Tour.parse(new String[] {"--scenario=client-same-key"}).prove()).isFalse();
    assertThatThrownBy(() -> Tour.parse(new String[] {"--prove", "--scenario=client-same-key"}))
        .isInstanceOf(Tour.UsageException.class).hasMessageContaining("--prove runs on its own");
    assertThatThrownBy(() -> Tour.parse(new String[] {"--nope"})).hasMessageContaining("--prove");
    assertThat(Tour.usage()).contains("--prove ");
  }
}
