package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.testing.TestDatabase;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The command line: options, bad options, and the summary line of a run. */
class TourTest {

  @Test
  void aBadOptionListsTheValidOnes() {
    assertThatThrownBy(() -> Tour.parse(new String[] {"--speed=fast"}))
        .isInstanceOf(Tour.UsageException.class)
        .hasMessageContaining("--speed=fast").hasMessageContaining("--scenario=").hasMessageContaining("--help");
    assertThatThrownBy(() -> Tour.parse(new String[] {"--scenario=nope"}))
        .hasMessageContaining("'nope'").hasMessageContaining("client-fresh-key").hasMessageContaining("zombie");
    assertThatThrownBy(() -> Tour.parse(new String[] {"--faults=gremlins"}))
        .hasMessageContaining("--faults").hasMessageContaining("'gremlins'").hasMessageContaining("worker-crash");
    assertThatThrownBy(() -> Tour.parse(new String[] {"--guards=hope"}))
        .hasMessageContaining("--guards").hasMessageContaining("provider-key");
    assertThatThrownBy(() -> Tour.parse(new String[] {"--scenario=client-same-key", "--faults=all"}))
        .hasMessageContaining("not both");
  }

  @Test
  void faultsAndGuardsByTheirNamesOrTheirHops() throws Exception {
    Tour.Options o = Tour.parse(new String[] {"--faults=lost-reply,balancer", "--guards=all"});
    assertThat(o.scenarios()).singleElement().satisfies(s -> {
      assertThat(s.setup().faults()).containsExactlyInAnyOrder(Hop.APP, Hop.BALANCER);
      assertThat(s.setup().guards()).containsExactlyInAnyOrder(Hop.values());
    });
    assertThat(Tour.parse(new String[] {}).scenarios()).hasSize(Scenario.ALL.size());
    assertThat(Tour.parse(new String[] {"--help"}).help()).isTrue();
    assertThat(Tour.usage()).contains("--faults=").contains("webhook-inbox").contains("all-broken-all-guards");
  }

  @Test
  void aCustomRunPrintsItsTableAndSummaryLine() throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    Tour.run(Tour.parse(new String[] {"--faults=webhook-again", "--guards=none"}), new PrintStream(bytes, true, StandardCharsets.UTF_8));
    String out = bytes.toString(StandardCharsets.UTF_8);
    // The webhook came twice and nothing dropped the copy: two emails for one charge.
    assertThat(out).contains("scenario=custom payment_rows=1 charges=1 receipts=2");
    assertThat(out).contains("provider delivers event");
    assertThat(out).contains("scenario=custom payment_rows=1 charges=1 receipts=2" + System.lineSeparator() + "breaks scenario=custom duplicate_intents=");
    assertThat(out).contains("idem.outbox.published{source=outbox} "); // the meters block
  }

  @Test
  void theDatabaseOptionNamesPostgresqlOrMariadb_withoutItTheFixturesChoice() throws Exception {
    assertThat(Tour.parse(new String[] {"--db=mariadb"}).db()).isEqualTo(TestDatabase.Vendor.MARIADB);
    assertThat(Tour.parse(new String[] {"--db=postgresql", "--scenario=client-same-key"}).db()).isEqualTo(TestDatabase.Vendor.POSTGRESQL);
    assertThat(Tour.parse(new String[] {"--prove", "--db=mariadb"}).prove()).isTrue(); // --prove takes --db
    assertThatThrownBy(() -> Tour.parse(new String[] {"--db=oracle"}))
        .isInstanceOf(Tour.UsageException.class).hasMessageContaining("'oracle'").hasMessageContaining("postgresql, mariadb");
    assertThat(Tour.usage()).contains("--db=postgresql|mariadb");
    // Without --db, the database the fixture makes this run's databases on.
    try (TestDatabase db = TestDatabase.newDatabase("tour_default")) {
      assertThat(Tour.parse(new String[] {}).db()).isEqualTo(db.vendor());
    }
  }
}
