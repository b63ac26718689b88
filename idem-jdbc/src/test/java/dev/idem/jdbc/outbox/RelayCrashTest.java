package dev.idem.jdbc.outbox;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** A relay process killed with SIGKILL between publish and mark: at least once, absorbed by an inbox. */
@IdemTest(poolSize = 4, sql = {"CREATE TABLE published (id uuid NOT NULL, relay int NOT NULL)",
    "CREATE TABLE shipments (message_id text NOT NULL)"})
class RelayCrashTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool, Idem injected) {
    db = database;
    ds = pool;
    idem = injected;
  }

  static long count(String query) {
    return db.count(query);
  }

  @Test
  void aRelayKilledBetweenPublishAndMarkIsRepublishedWithTheSameIdAndTheInboxAppliesItOnce() throws Exception {
    UUID id = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(), NewMessage.of("shipments", "ship order 7".getBytes(StandardCharsets.UTF_8))));

    String java = System.getProperty("java.home") + File.separator + "bin" + File.separator + "java";
    Process child = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), RelayChild.class.getName(), db.jdbcUrl())
        .redirectErrorStream(true)
        .start();
    String line;
    try (BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
      while ((line = out.readLine()) != null && !line.startsWith("PUBLISHED ")) {
        // skip the child's log lines
      }
      assertThat(line).as("the child relay published").isEqualTo("PUBLISHED " + id);
      child.destroyForcibly(); // SIGKILL: no shutdown hook, no rollback from the JVM
      assertThat(child.waitFor(30, TimeUnit.SECONDS)).isTrue();
    }
    assertThat(count("SELECT count(*) FROM published WHERE id = '" + id + "'")).isEqualTo(1);

    // The killed relay's transaction dies with its connection; until the server notices, the row
    // stays locked and SKIP LOCKED passes it by. Then a second relay publishes it again, same id.
    Relay second = idem.relay(m -> {
      try (Connection c = ds.getConnection(); var ps = c.prepareStatement("INSERT INTO published VALUES (?, 1)")) {
        ps.setObject(1, m.id());
        ps.executeUpdate();
      }
    }).build();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (second.runOnce() == 0) {
      assertThat(System.nanoTime()).isLessThan(deadline);
      Thread.sleep(50);
    }
    assertThat(count("SELECT count(*) FROM published WHERE id = '" + id + "'")).isEqualTo(2);
    assertThat(count("SELECT count(*) FROM idem_outbox WHERE id = '" + id + "' AND status = 'S'")).isEqualTo(1);

    // The consumer gets both copies; its inbox applies the shipment once.
    Inbox shipping = idem.inbox("shipping").window(DedupeWindow.of(Duration.ofDays(8))).build();
    List<UUID> copies = idem.inTransaction(tx -> tx.dsl().fetch("SELECT id FROM published ORDER BY relay").getValues(0, UUID.class));
    List<Execution<Void>> outcomes = new ArrayList<>();
    for (UUID copy : copies) {
      outcomes.add(shipping.receive(copy.toString(), tx -> tx.dsl().execute("INSERT INTO shipments VALUES (?)", copy.toString())));
    }
    assertThat(outcomes).extracting(Execution::applied, Execution::replayed)
        .containsExactly(org.assertj.core.groups.Tuple.tuple(true, false), org.assertj.core.groups.Tuple.tuple(false, true));
    assertThat(count("SELECT count(*) FROM shipments WHERE message_id = '" + id + "'")).isEqualTo(1);
  }
}
