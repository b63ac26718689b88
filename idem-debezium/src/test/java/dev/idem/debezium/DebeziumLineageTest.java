package dev.idem.debezium;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.OutboxLayout;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.micrometer.IdemGauges;
import dev.idem.result.Codec;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import io.debezium.embedded.ClientProvided;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.KeyValueHeaderChangeEventFormat;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Debezium layout end to end with the converters {@link DebeziumOutbox} sets (the embedded
 * engine's {@link ClientProvided} format applies them, as Kafka Connect would): the record key is
 * the aggregate id's plain UTF-8 bytes, the intent arrives as the {@code idem-intent} header and
 * an inbox records it; the slot lag gauge grows while the connector is stopped with messages
 * written and falls back to the few hundred bytes a caught-up connector leaves unconfirmed. Read from the database and the records' bytes.
 */
@IdemTest(logicalReplication = true, poolSize = 6,
    vendors = TestDatabase.Vendor.POSTGRESQL, vendorsReason = "the Debezium layout and Debezium's PostgreSQL connector (logical"
        + " replication); on MariaDB the layout is refused (DebeziumOnMariaDbTest)",
    sql = "CREATE TABLE shipments (message_id text PRIMARY KEY)")
class DebeziumLineageTest {
  private static final Pattern URL = Pattern.compile("jdbc:postgresql://([^:/]+):(\\d+)/([^?]+)(\\?.*)?");
  private static final String SLOT = "idem_lineage_test";
  /** The slot's lag once the connector confirmed its last message: at most this many bytes. */
  private static final double CAUGHT_UP = 1024;

  @TempDir
  static Path offsets;

  final TestDatabase db;
  final Idem idem;
  final Inbox shipping;

  DebeziumLineageTest(TestDatabase db, DataSource ds) {
    this.db = db;
    this.idem = Idem.builder(ds).outboxLayout(OutboxLayout.DEBEZIUM).build();
    this.shipping = idem.inbox("shipping").build();
  }

  @AfterAll
  static void dropTheSlot(TestDatabase db) {
    db.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '" + SLOT + "'");
  }

  /** One record as Kafka would store it: key, value and header values as the converters wrote their bytes. */
  record Delivered(String topic, byte[] key, byte[] value, Map<String, byte[]> headers) {
    String header(String name) {
      byte[] v = headers.get(name);
      return v == null ? null : new String(v, StandardCharsets.UTF_8);
    }
  }

  DebeziumEngine<ChangeEvent<Object, Object>> engine(List<Delivered> into) {
    Matcher m = URL.matcher(db.jdbcUrl());
    assertThat(m.matches()).as(db.jdbcUrl()).isTrue();
    Properties p = DebeziumOutbox.builder(idem).database(m.group(1), Integer.parseInt(m.group(2)), m.group(3))
        .slot(SLOT).publication("idem_lineage_test").properties();
    Matcher user = Pattern.compile("[?&]user=([^&]*)").matcher(m.group(4) == null ? "" : m.group(4));
    if (user.find()) {
      p.setProperty("database.user", user.group(1));
    }
    p.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
    p.setProperty("offset.storage.file.filename", offsets.resolve("offsets.dat").toString());
    p.setProperty("offset.flush.interval.ms", "100");
    return DebeziumEngine.create(KeyValueHeaderChangeEventFormat.of(ClientProvided.class, ClientProvided.class, ClientProvided.class))
        .using(p).notifying((batch, committer) -> {
          for (ChangeEvent<Object, Object> e : batch) {
            Map<String, byte[]> headers = new HashMap<>();
            for (io.debezium.engine.Header<Object> h : e.<Object>headers()) {
              headers.put(h.getKey(), (byte[]) h.getValue());
            }
            into.add(new Delivered(e.destination(), (byte[]) e.key(), (byte[]) e.value(), headers));
            committer.markProcessed(e);
          }
          committer.markBatchFinished();
        }).build();
  }

  /** The slot lag gauge's value after a refresh. */
  static double lag(IdemGauges gauges, SimpleMeterRegistry registry) {
    assertThat(gauges.refresh()).as("the slot lag refreshed").isTrue();
    return registry.find(IdemGauges.SLOT_LAG).gauge().value();
  }

  @Test
  void thePlainKeyAndTheIntentHeaderArrive_theInboxRecordsTheIntent_andTheSlotLagGaugeShowsTheBacklog() throws Exception {
    ExecutorService runner = Executors.newSingleThreadExecutor();
    List<Delivered> delivered = new CopyOnWriteArrayList<>();
    DebeziumEngine<ChangeEvent<Object, Object>> first = engine(delivered);
    runner.execute(first);
    DebeziumOutboxTest.awaitStreaming(db, SLOT);

    IdempotencyKey order = IdempotencyKey.of("shop", "order-5");
    UUID[] withIntent = new UUID[1];
    idem.executor().build().execute(order, Fingerprint.of("5"), Codec.utf8(), tx -> {
      withIntent[0] = idem.outbox().enqueue(NewMessage.of("orders", "{\"n\":5}".getBytes(StandardCharsets.UTF_8))
          .withAggregateKey("order-5"));
      return "placed";
    });
    UUID without = idem.inTransaction(tx -> idem.outbox().enqueue(NewMessage.of("audit", "x".getBytes(StandardCharsets.UTF_8))));
    DebeziumOutboxTest.awaitSize(delivered, 2);

    Delivered placed = delivered.stream().filter(d -> d.topic().equals("orders")).findFirst().orElseThrow();
    assertThat(placed.key()).as("the aggregate id's plain UTF-8 bytes, no JSON envelope").isEqualTo("order-5".getBytes(StandardCharsets.UTF_8));
    assertThat(placed.value()).isEqualTo("{\"n\":5}".getBytes(StandardCharsets.UTF_8));
    assertThat(placed.header("id")).isEqualTo(withIntent[0].toString());
    assertThat(placed.header(DebeziumOutbox.INTENT_HEADER)).isEqualTo("shop:order-5");
    Delivered audit = delivered.stream().filter(d -> d.topic().equals("audit")).findFirst().orElseThrow();
    assertThat(audit.header("id")).isEqualTo(without.toString());
    assertThat(audit.key()).isNull();
    assertThat(audit.header(DebeziumOutbox.INTENT_HEADER)).as("no intent: none made up").isNull();

    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (IdemGauges gauges = IdemGauges.startForDebezium(idem.operations(), registry, Duration.ofHours(1), SLOT)) {
      assertThat(registry.find(IdemGauges.PENDING).gauge()).as("no polled backlog in this layout").isNull();
      // caught up: the connector confirmed its last message. What it leaves unconfirmed is the WAL
      // after that position (the commit record, the server's own records): a few hundred bytes
      // (344 measured here), never 0 exactly, since Debezium confirms an event's position
      double residue = awaitLag(gauges, registry, CAUGHT_UP);
      first.close();
      // stopped with messages written: the backlog is the slot's
      for (int i = 0; i < 20; i++) {
        int n = i;
        idem.inTransaction(tx -> idem.outbox().enqueue(NewMessage.of("orders", ("late " + n).getBytes(StandardCharsets.UTF_8))));
      }
      double behind = lag(gauges, registry);
      assertThat(behind).as("the slot's lag while the connector is stopped").isGreaterThan(CAUGHT_UP).isGreaterThan(residue);
      assertThat(idem.operations().replicationSlotLag(SLOT)).isGreaterThanOrEqualTo((long) behind);

      List<Delivered> again = new CopyOnWriteArrayList<>();
      DebeziumEngine<ChangeEvent<Object, Object>> second = engine(again);
      runner.execute(second);
      DebeziumOutboxTest.awaitSize(again, 20);
      awaitLag(gauges, registry, CAUGHT_UP);
      second.close();
    }
    runner.shutdown();
    assertThat(runner.awaitTermination(30, TimeUnit.SECONDS)).isTrue();

    // after the lag checks: the inbox's writes are WAL the connector has no message to confirm past
    // the inbox records the intent each record carries
    shipping.receiveAll(List.copyOf(delivered), d -> d.header("id"), d -> d.header(DebeziumOutbox.INTENT_HEADER),
        (tx, d) -> tx.dsl().execute("INSERT INTO shipments VALUES (?)", d.header("id")));
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'shipping' AND message_id = ? AND intent = 'shop:order-5'",
        withIntent[0].toString())).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'shipping' AND intent IS NULL")).isEqualTo(1);
  }

  /** Refreshes the gauge until it reads at most {@code bytes}, for up to 60 s; returns what it read. */
  static double awaitLag(IdemGauges gauges, SimpleMeterRegistry registry, double bytes) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    double seen;
    while ((seen = lag(gauges, registry)) > bytes) {
      assertThat(System.nanoTime()).as("the slot lag at most %s bytes, still %s", bytes, seen).isLessThan(deadline);
      Thread.sleep(100);
    }
    return seen;
  }
}
