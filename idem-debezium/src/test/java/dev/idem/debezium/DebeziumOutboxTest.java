package dev.idem.debezium;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.inbox.Received;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.OutboxLayout;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import io.debezium.embedded.Connect;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Messages enqueued through idem in the {@link OutboxLayout#DEBEZIUM} layout, relayed by Debezium's
 * embedded engine with {@link DebeziumOutbox}'s settings against a PostgreSQL with {@code
 * wal_level=logical}, consumed through an inbox by the {@code id} header. Counted in the database.
 */
@IdemTest(logicalReplication = true, poolSize = 6,
    vendors = TestDatabase.Vendor.POSTGRESQL, vendorsReason = "the Debezium layout (idem_outbox_events) and Debezium's PostgreSQL"
        + " connector, which reads it by logical replication (wal_level=logical); on MariaDB the layout is refused (DebeziumOnMariaDbTest)",
    sql = "CREATE TABLE shipments (message_id text NOT NULL, topic text NOT NULL, order_key text, body text NOT NULL)")
class DebeziumOutboxTest {
  private static final Pattern URL = Pattern.compile("jdbc:postgresql://([^:/]+):(\\d+)/([^?]+)(\\?.*)?");
  /** The topic of {@link #awaitEverythingCommittedSoFar()}'s messages, which the tests' handlers never see. */
  private static final String SENTINEL = "sentinel";

  @TempDir
  static Path offsets;

  final TestDatabase db;
  final DataSource ds;
  final Idem idem;
  final Inbox shipping;
  /** Per sentinel message id: counted down when a run's engine delivered it. */
  final Map<String, CountDownLatch> sentinels = new ConcurrentHashMap<>();

  DebeziumOutboxTest(TestDatabase db, DataSource ds) {
    this.db = db;
    this.ds = ds;
    this.idem = Idem.builder(ds).outboxLayout(OutboxLayout.DEBEZIUM).build();
    this.shipping = idem.inbox("shipping").window(DedupeWindow.of(Duration.ofDays(7))).build();
  }

  /** The engine's slot holds the database: dropped before {@link IdemTest} drops the database. */
  @AfterAll
  static void dropTheSlot(TestDatabase db) {
    db.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = current_database()");
  }

  /** One record as the consumer saw it. */
  record Delivered(String topic, String key, String id, String type, String headers, String payload) {
    static Delivered of(SourceRecord r) {
      return new Delivered(r.topic(), (String) r.key(), header(r, "id"), header(r, "type"), header(r, DebeziumOutbox.HEADERS_HEADER),
          new String(bytes(r.value()), StandardCharsets.UTF_8));
    }

    /** The value's bytes: a ByteBuffer in the engine's record (Kafka Connect's ByteArrayConverter takes either). */
    private static byte[] bytes(Object value) {
      if (value instanceof java.nio.ByteBuffer b) {
        byte[] out = new byte[b.remaining()];
        b.duplicate().get(out);
        return out;
      }
      return (byte[]) value;
    }

    private static String header(SourceRecord r, String name) {
      Header h = r.headers().lastWithName(name);
      return h == null || h.value() == null ? null : h.value().toString();
    }
  }

  /**
   * An embedded engine with the helper's settings, on this test's offsets file; each batch goes to
   * {@code handler} without the sentinels of {@link #awaitEverythingCommittedSoFar()}, which are
   * counted down after the batch.
   */
  DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> engine(DebeziumEngine.ChangeConsumer<ChangeEvent<SourceRecord, SourceRecord>> handler) {
    Matcher m = URL.matcher(db.jdbcUrl());
    assertThat(m.matches()).as(db.jdbcUrl()).isTrue();
    String params = m.group(4) == null ? "" : m.group(4);
    Properties p = DebeziumOutbox.builder(idem)
        .database(m.group(1), Integer.parseInt(m.group(2)), m.group(3))
        .credentials(param(params, "user", "postgres"), param(params, "password", null))
        .slot("idem_outbox_test")
        .publication("idem_outbox_test")
        .properties();
    p.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
    p.setProperty("offset.storage.file.filename", offsets.resolve("offsets.dat").toString());
    p.setProperty("offset.flush.interval.ms", "100");
    return DebeziumEngine.create(Connect.class).using(p).notifying((batch, committer) -> {
      List<String> arrived = new ArrayList<>();
      List<ChangeEvent<SourceRecord, SourceRecord>> records = new ArrayList<>();
      for (ChangeEvent<SourceRecord, SourceRecord> e : batch) {
        if (SENTINEL.equals(e.value().topic())) {
          arrived.add(Delivered.of(e.value()).id());
        } else {
          records.add(e);
        }
      }
      if (!records.isEmpty()) {
        handler.handleBatch(records, committer);
      }
      // Never marked processed here: the first run must commit no offset at all.
      arrived.forEach(id -> sentinels.computeIfAbsent(id, k -> new CountDownLatch(1)).countDown());
    }).build();
  }

  /**
   * Commits a message on the {@link #SENTINEL} topic and waits until the running engine has handed
   * it over: logical decoding streams transactions in commit order, so by then every record of a
   * transaction committed before it has reached the test's handler. What a pause could only hope
   * for ("anything more would have arrived by now"), known.
   */
  void awaitEverythingCommittedSoFar() throws InterruptedException {
    UUID id = idem.inTransaction(tx -> idem.outbox().enqueue(NewMessage.of(SENTINEL, "sentinel".getBytes(StandardCharsets.UTF_8))));
    CountDownLatch delivered = sentinels.computeIfAbsent(id.toString(), k -> new CountDownLatch(1));
    assertThat(delivered.await(60, TimeUnit.SECONDS)).as("the sentinel %s delivered", id).isTrue();
  }

  private static String param(String params, String name, String otherwise) {
    Matcher m = Pattern.compile("[?&]" + name + "=([^&]*)").matcher(params);
    return m.find() ? m.group(1) : otherwise;
  }

  /** Waits until the engine's replication slot streams: what is committed from then on reaches it. */
  void awaitStreaming() throws InterruptedException {
    awaitStreaming(db, "idem_outbox_test");
  }

  /** Waits until replication slot {@code slot} is active (its engine streams). */
  static void awaitStreaming(TestDatabase db, String slot) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (db.count("SELECT count(*) FROM pg_replication_slots WHERE slot_name = ? AND active", slot) == 0) {
      assertThat(System.nanoTime()).as("the engine's slot became active").isLessThan(deadline);
      Thread.sleep(50);
    }
  }

  static void awaitSize(List<?> list, int size) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (list.size() < size) {
      assertThat(System.nanoTime()).as("%d records, got %d", size, list.size()).isLessThan(deadline);
      Thread.sleep(50);
    }
  }

  /** The consumer: each batch through the inbox by the id header, in one transaction; true if every record settled. */
  boolean consume(List<ChangeEvent<SourceRecord, SourceRecord>> batch) {
    List<Delivered> records = batch.stream().map(e -> Delivered.of(e.value())).toList();
    Received<Delivered> r = shipping.receiveAll(records, Delivered::id, (tx, d) ->
        tx.dsl().execute("INSERT INTO shipments VALUES (?, ?, ?, ?)", d.id(), d.topic(), d.key(), d.payload()));
    return r.allSettled();
  }

  Map<String, Long> shipmentsPerId() throws SQLException {
    Map<String, Long> out = new TreeMap<>();
    try (Connection c = ds.getConnection(); var st = c.createStatement();
        var rs = st.executeQuery("SELECT message_id, count(*) FROM shipments GROUP BY message_id")) {
      while (rs.next()) {
        out.put(rs.getString(1), rs.getLong(2));
      }
    }
    return out;
  }

  @Test
  void messagesArriveWithTheirIdsRoutedAndKeyedAndAnInboxAppliesEachOnceAcrossARestart() throws Exception {
    ExecutorService runner = Executors.newSingleThreadExecutor();
    List<Delivered> firstRun = new CopyOnWriteArrayList<>();
    // Run 1: the consumer applies every batch but "dies" before committing any offset (never marks a
    // record processed), as a crash between the effect and the offset commit.
    DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> first = engine((batch, committer) -> {
      consume(batch);
      batch.forEach(e -> firstRun.add(Delivered.of(e.value())));
    });
    runner.execute(first);
    awaitStreaming();

    List<UUID> ids = new ArrayList<>();
    for (int i = 0; i < 10; i++) {
      int n = i;
      ids.add(idem.inTransaction(tx -> idem.outbox().enqueue(NewMessage.of(n % 2 == 0 ? "orders" : "invoices",
              ("{\"n\":" + n + "}").getBytes(StandardCharsets.UTF_8))
          .withAggregateKey("order-" + (n % 3)).withHeader("type", "Shipped").withHeader("trace", "t-" + n))));
    }
    // several in one transaction, one without a key or a type
    ids.addAll(idem.inTransaction(tx -> idem.outbox().enqueueAll(List.of(
        NewMessage.of("orders", "batch-a".getBytes(StandardCharsets.UTF_8)).withAggregateKey("order-9"),
        NewMessage.of("audit", "no key".getBytes(StandardCharsets.UTF_8))))));
    // a transaction that rolls back: its message never exists, so it is never relayed
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      idem.outbox().enqueue(NewMessage.of("orders", "rolled back".getBytes(StandardCharsets.UTF_8)));
      throw new IOException("the business change failed");
    })).isInstanceOf(IOException.class);
    assertThat(db.count("SELECT count(*) FROM idem_outbox_events")).as("the events table stays empty").isZero();
    assertThat(db.count("SELECT count(*) FROM idem_outbox")).as("nothing for the polling relay").isZero();

    awaitSize(firstRun, 12);
    awaitEverythingCommittedSoFar(); // anything more (an update, a delete, the rolled-back message) came before it
    first.close();

    assertThat(firstRun).hasSize(12);
    assertThat(firstRun).extracting(Delivered::id).containsExactlyInAnyOrderElementsOf(ids.stream().map(UUID::toString).toList());
    Delivered d0 = firstRun.stream().filter(d -> d.id().equals(ids.get(0).toString())).findFirst().orElseThrow();
    assertThat(d0).isEqualTo(new Delivered("orders", "order-0", ids.get(0).toString(), "Shipped",
        d0.headers(), "{\"n\":0}"));
    assertThat(d0.headers()).contains("\"trace\": \"t-0\"").contains("\"type\": \"Shipped\"");
    Delivered d1 = firstRun.stream().filter(d -> d.id().equals(ids.get(1).toString())).findFirst().orElseThrow();
    assertThat(d1.topic()).isEqualTo("invoices");
    assertThat(d1.key()).isEqualTo("order-1");
    Delivered noKey = firstRun.stream().filter(d -> d.id().equals(ids.get(11).toString())).findFirst().orElseThrow();
    assertThat(noKey).isEqualTo(new Delivered("audit", null, ids.get(11).toString(), "", "{}", "no key"));
    // per key, in the order they were written
    assertThat(firstRun.stream().filter(d -> "order-0".equals(d.key())).map(Delivered::payload))
        .containsExactly("{\"n\":0}", "{\"n\":3}", "{\"n\":6}", "{\"n\":9}");
    assertThat(shipmentsPerId()).hasSize(12).allSatisfy((id, n) -> assertThat(n).as(id).isEqualTo(1));

    // Run 2: the engine restarts from the last committed offset (none) and re-delivers every
    // message; the inbox applies none of them again. This consumer commits its offsets.
    enqueueOne("after-restart", ids);
    List<Delivered> secondRun = new CopyOnWriteArrayList<>();
    DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> second = engine((batch, committer) -> {
      if (consume(batch)) {
        for (ChangeEvent<SourceRecord, SourceRecord> e : batch) {
          secondRun.add(Delivered.of(e.value()));
          committer.markProcessed(e);
        }
        committer.markBatchFinished();
      }
    });
    runner.execute(second);
    awaitSize(secondRun, 13);
    second.close();
    assertThat(secondRun).extracting(Delivered::id).as("re-delivered, with the same ids")
        .containsAll(firstRun.stream().map(Delivered::id).toList());
    assertThat(shipmentsPerId()).hasSize(13).allSatisfy((id, n) -> assertThat(n).as(id).isEqualTo(1));
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'shipping'")).isEqualTo(13);

    // Run 3: offsets were committed; a restart delivers only what is new
    List<Delivered> thirdRun = new CopyOnWriteArrayList<>();
    DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> third = engine((batch, committer) -> {
      consume(batch);
      for (ChangeEvent<SourceRecord, SourceRecord> e : batch) {
        thirdRun.add(Delivered.of(e.value()));
        committer.markProcessed(e);
      }
      committer.markBatchFinished();
    });
    runner.execute(third);
    awaitStreaming();
    UUID last = enqueueOne("third", ids);
    awaitSize(thirdRun, 1);
    awaitEverythingCommittedSoFar(); // a message of an earlier run delivered again would have come before it
    third.close();
    runner.shutdown();
    assertThat(runner.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
    assertThat(thirdRun).extracting(Delivered::id).containsExactly(last.toString());
    assertThat(shipmentsPerId()).hasSize(14).allSatisfy((id, n) -> assertThat(n).as(id).isEqualTo(1));
  }

  private UUID enqueueOne(String body, List<UUID> ids) {
    UUID id = idem.inTransaction(tx -> idem.outbox().enqueue(NewMessage.of("orders", body.getBytes(StandardCharsets.UTF_8))
        .withAggregateKey("order-late")));
    ids.add(id);
    return id;
  }

  @Test
  void theSettingsAreValidated() {
    assertThatThrownBy(() -> DebeziumOutbox.builder(idem).build()).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("database hostname");
    assertThatThrownBy(() -> DebeziumOutbox.builder(idem).database("h", 0, "d").build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("port");
    assertThatThrownBy(() -> DebeziumOutbox.builder(idem).database("h", 5432, "d").slot("Bad-Slot").build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("slot");
    assertThatThrownBy(() -> DebeziumOutbox.builder(null)).isInstanceOf(IllegalArgumentException.class);
    Map<String, String> p = DebeziumOutbox.builder(idem).database("h", 5432, "d").build();
    // Debezium names a table with its schema
    assertThat(p).containsEntry("table.include.list", "idem.idem_outbox_events")
        .containsEntry("transforms.outbox.route.topic.replacement", "${routedByValue}")
        .containsAllEntriesOf(DebeziumOutbox.eventRouter())
        // the key as plain UTF-8 text (as idem-kafka writes it), never Kafka Connect's JSON envelope
        .containsEntry("key.converter", "org.apache.kafka.connect.storage.StringConverter")
        .containsEntry("header.converter", "org.apache.kafka.connect.storage.SimpleHeaderConverter");
    assertThat(p.get("transforms.outbox.table.fields.additional.placement")).contains("intent:header:idem-intent");
  }
}
