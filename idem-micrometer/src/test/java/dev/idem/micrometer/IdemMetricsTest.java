package dev.idem.micrometer;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.entry;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.Outbox;
import dev.idem.jdbc.outbox.OutboxMessage;
import dev.idem.jdbc.outbox.Publisher;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.jdbc.transition.Transitions;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import dev.idem.transition.Outcome;
import dev.idem.transition.StatePath;
import dev.idem.window.DedupeWindow;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.distribution.CountAtBucket;
import io.micrometer.core.instrument.distribution.HistogramSnapshot;
import io.micrometer.core.instrument.observation.DefaultMeterObservationHandler;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.observation.ObservationRegistry;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Real traffic through a real {@link Idem} on a real database (PostgreSQL or MariaDB), then the
 * meters read back and compared with the calls made and with the rows in the database.
 */
@IdemTest(poolSize = 6, sql = {
    "CREATE TABLE charges (ref text NOT NULL)",
    // VARCHAR: MariaDB keys no TEXT column without a length
    "CREATE TABLE orders (id varchar(100) PRIMARY KEY, status text NOT NULL)"})
class IdemMetricsTest {
  final TestDatabase db;
  final DataSource ds;
  SimpleMeterRegistry registry;
  Idem idem;

  IdemMetricsTest(TestDatabase db, DataSource ds) {
    this.db = db;
    this.ds = ds;
  }

  @BeforeEach
  void fresh() {
    for (String table : new String[] {"charges", "orders", "idem_keys", "idem_inbox", "idem_outbox"}) {
      db.execute("TRUNCATE TABLE " + table); // one at a time: MariaDB's TRUNCATE takes one table
    }
    registry = new SimpleMeterRegistry();
    idem = Idem.builder(ds).listener(IdemMetrics.of(registry)).build();
  }

  boolean mariadb() {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  double count(String name, String... tags) {
    Counter c = registry.find(name).tags(tags).counter();
    return c == null ? 0 : c.count();
  }

  static Fingerprint request(int amount) {
    return Fingerprint.ofFields(Map.of("amount", amount));
  }

  @Test
  void executorAppliesReplaysAndMismatchesAreCountedOncePerCall() {
    IdempotentExecutor payments = idem.executor().name("executor:payments").build();
    int keys = 5;
    int repeatsEach = 2;
    for (int i = 0; i < keys; i++) {
      IdempotencyKey key = IdempotencyKey.of("shop", "k" + i);
      for (int call = 0; call <= repeatsEach; call++) {
        Execution<String> e = payments.execute(key, request(10), Codec.utf8(), tx -> {
          tx.dsl().execute("INSERT INTO charges VALUES (?)", key.value());
          return "ok";
        });
        assertThat(e instanceof Execution.Applied).isEqualTo(call == 0);
      }
    }
    IdempotencyKey reused = IdempotencyKey.of("shop", "k0");
    assertThatThrownBy(() -> payments.execute(reused, request(99), Codec.utf8(), tx -> "never"))
        .isInstanceOf(KeyReuseException.class);

    String source = "executor:payments";
    long rows = db.count("SELECT count(*) FROM idem_keys WHERE scope = 'shop'");
    assertThat(rows).isEqualTo(keys).isEqualTo(db.count("SELECT count(*) FROM charges"));
    assertThat(count(IdemMetrics.APPLIED, "source", source)).isEqualTo(rows);
    assertThat(count(IdemMetrics.REPEATS, "source", source, "kind", "replayed")).isEqualTo(keys * repeatsEach);
    assertThat(count(IdemMetrics.FINGERPRINT_MISMATCHES, "source", source)).isEqualTo(1);

    Timer age = registry.find(IdemMetrics.REPEAT_AGE).tags("source", source).timer();
    assertThat(age.count()).isEqualTo(keys * repeatsEach);
    DistributionSummary used = registry.find(IdemMetrics.REPEAT_WINDOW_USED).tags("source", source).summary();
    assertThat(used.count()).isEqualTo(keys * repeatsEach);
    assertThat(used.max()).isBetween(0.0, 100.0);
    // Every series is tagged by hop and outcome only: no key ever becomes a tag.
    assertThat(registry.getMeters()).allSatisfy(m -> assertThat(m.getId().getTags())
        .allSatisfy(t -> assertThat(t.getValue()).doesNotStartWith("k")));
  }

  @Test
  void repeatsEarlyMidwayAndLateInTheWindowLandInDifferentExportedBuckets() {
    DedupeWindow tenDays = DedupeWindow.of(Duration.ofDays(10));
    IdempotentExecutor payments = idem.executor().name("executor:windowed").window(tenDays).build();
    // Each key's row is backdated by the database clock, so its repeat is caught that far into the
    // window; the repeat goes through another executor, which has not answered the key in-process.
    IdempotentExecutor repeats = idem.executor().name("executor:windowed").window(tenDays).build();
    Map<String, String> ages = Map.of("early", "1 day", "midway", "4 days 12 hours", "late", "9 days 12 hours");
    // MariaDB: the same ages in hours (its DATETIME columns hold UTC, with no calendar to follow)
    Map<String, Integer> hours = Map.of("early", 24, "midway", 108, "late", 228);
    ages.forEach((name, age) -> {
      IdempotencyKey key = IdempotencyKey.of("windowed", name);
      payments.execute(key, request(1), Codec.utf8(), tx -> "ok");
      db.execute("UPDATE idem_keys SET created_at = created_at - " + (mariadb() ? "INTERVAL " + hours.get(name) + " HOUR"
          : "interval '" + age + "'") + " WHERE scope = 'windowed' AND idem_keys.key = '" + name + "'");
      assertThat(repeats.execute(key, request(1), Codec.utf8(), tx -> "again").replayed()).isTrue();
    });
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'windowed'")).isEqualTo(3);

    DistributionSummary used = registry.find(IdemMetrics.REPEAT_WINDOW_USED).tags("source", "executor:windowed").summary();
    assertThat(used.getId().getBaseUnit()).isEqualTo("percent");
    HistogramSnapshot snapshot = used.takeSnapshot();
    assertThat(snapshot.count()).isEqualTo(3);
    Map<Double, Double> cumulative = new TreeMap<>();
    for (CountAtBucket b : snapshot.histogramCounts()) {
      cumulative.put(b.bucket(), b.count());
    }
    // Exported as Prometheus would: cumulative counts per upper bound. 10% is under 25, 45% under 50,
    // 95% under 100 only: three different buckets, and the alert's le=80 excludes only the late one.
    assertThat(cumulative).containsExactly(entry(25.0, 1.0), entry(50.0, 2.0), entry(80.0, 2.0), entry(90.0, 2.0), entry(100.0, 3.0));
    assertThat(used.max()).isBetween(95.0, 96.0);
  }

  @Test
  void anInboxDuplicateIsAReplayOfItsHop() {
    Inbox billing = idem.inbox("billing").build();
    for (String id : new String[] {"m1", "m2", "m1", "m1"}) {
      billing.receive(id, tx -> tx.dsl().execute("INSERT INTO charges VALUES (?)", id));
    }
    long rows = db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'billing'");
    assertThat(rows).isEqualTo(2).isEqualTo(db.count("SELECT count(*) FROM charges"));
    assertThat(count(IdemMetrics.APPLIED, "source", "inbox:billing")).isEqualTo(rows);
    assertThat(count(IdemMetrics.REPEATS, "source", "inbox:billing", "kind", "replayed")).isEqualTo(2);
    assertThat(registry.find(IdemMetrics.REPEATS).counters()).hasSize(1); // one name for executor and inbox repeats
  }

  @Test
  void transitionsCountAppliedAlreadyDoneAndConflict() {
    db.execute("INSERT INTO orders VALUES ('o1', 'PLACED'), ('o2', 'CANCELLED')");
    Transitions orders = idem.transitions("orders").path(StatePath.of("PLACED", "PACKED", "SHIPPED")).build();
    assertThat(pack(orders, "o1")).isEqualTo(Outcome.APPLIED);
    assertThat(pack(orders, "o1")).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(pack(orders, "o2")).isEqualTo(Outcome.CONFLICT);

    String source = "transitions:orders";
    assertThat(count(IdemMetrics.APPLIED, "source", source)).isEqualTo(db.count("SELECT count(*) FROM orders WHERE status = 'PACKED'"));
    assertThat(count(IdemMetrics.REPEATS, "source", source, "kind", "already_done")).isEqualTo(1);
    assertThat(count(IdemMetrics.REPEATS, "source", source, "kind", "conflict")).isEqualTo(1);
  }

  Outcome pack(Transitions orders, String id) {
    Outcome outcome = idem.inTransaction(tx -> orders.advance(tx.connection(), id, "PLACED", "PACKED"));
    return outcome;
  }

  @Test
  void relayPublishesAndParksAsTheOutboxRowsShowAndGaugesFollowOnRefresh() throws Exception {
    Outbox outbox = idem.outbox();
    idem.inTransaction(tx -> {
      for (int i = 0; i < 3; i++) {
        outbox.enqueue(tx.connection(), NewMessage.of("orders", ("ok" + i).getBytes(StandardCharsets.UTF_8)));
      }
      for (int i = 0; i < 2; i++) {
        outbox.enqueue(tx.connection(), NewMessage.of("broken", ("bad" + i).getBytes(StandardCharsets.UTF_8)));
      }
      return null;
    });
    AtomicInteger calls = new AtomicInteger();
    Publisher publisher = m -> {
      calls.incrementAndGet();
      if (m.topic().equals("broken")) {
        throw new IllegalStateException("broker refused " + m.id());
      }
    };
    ObservationRegistry observations = ObservationRegistry.create();
    observations.observationConfig().observationHandler(new DefaultMeterObservationHandler(registry));

    try (IdemGauges gauges = IdemGauges.start(idem.operations(), registry, Duration.ofHours(1))) {
      assertThat(gauges.refresh()).isTrue();
      assertThat(gauge(IdemGauges.PENDING)).isEqualTo(5);
      assertThat(gauge(IdemGauges.PARKED)).isZero();
      // the oldest pending message's age, by the database clock
      assertThat(gauge(IdemGauges.OLDEST_PENDING)).isGreaterThanOrEqualTo(0)
          .isLessThanOrEqualTo(db.count(mariadb()
              ? "SELECT CEIL(TIMESTAMPDIFF(MICROSECOND, MIN(created_at), UTC_TIMESTAMP(6)) / 1000000) FROM idem_outbox WHERE status = 'P'"
              : "SELECT ceil(extract(epoch FROM now() - min(created_at)))::bigint FROM idem_outbox WHERE status = 'P'") + 1);
      assertThat(gauge(IdemGauges.UNKNOWN_OUTCOMES)).isZero();

      try (Relay relay = idem.relay(ObservedPublisher.wrap(publisher, observations)).maxAttempts(1).build()) {
        while (relay.runOnce() > 0) {
          // until nothing is due
        }
      }
      long sent = db.count("SELECT count(*) FROM idem_outbox WHERE status = 'S'");
      long parked = db.count("SELECT count(*) FROM idem_outbox WHERE status = 'X'");
      assertThat(sent).isEqualTo(3);
      assertThat(parked).isEqualTo(2);
      assertThat(count(IdemMetrics.OUTBOX_PUBLISHED, "source", "outbox")).isEqualTo(sent);
      assertThat(registry.find(IdemMetrics.OUTBOX_PUBLISH).tags("source", "outbox").timer().count()).isEqualTo(sent);
      assertThat(count(IdemMetrics.OUTBOX_FAILED, "source", "outbox", "parked", "true")).isEqualTo(parked);
      assertThat(count(IdemMetrics.OUTBOX_FAILED, "source", "outbox", "parked", "false")).isZero();

      // One observation per publish, tagged by topic, failures marked: so traces show every one.
      assertThat(calls.get()).isEqualTo(5);
      assertThat(registry.find(ObservedPublisher.NAME).tags("topic", "orders", "error", "none").timer().count()).isEqualTo(3);
      assertThat(registry.find(ObservedPublisher.NAME).tags("topic", "broken").timer().count()).isEqualTo(2);

      assertThat(gauge(IdemGauges.PENDING)).isEqualTo(5); // a scrape never queries: still the last refresh
      assertThat(gauges.refresh()).isTrue();
      assertThat(gauge(IdemGauges.PARKED)).isEqualTo(parked);
      assertThat(gauge(IdemGauges.PARKED_EFFECT_COMMITTED)).isZero();
      // a consumer that got one of them anyway (the broker took it before it refused): its effect committed
      idem.inbox("metrics-consumer").build().receive(firstParkedId(), tx -> { });
      assertThat(gauges.refresh()).isTrue();
      assertThat(gauge(IdemGauges.PARKED_EFFECT_COMMITTED)).isEqualTo(1)
          .isEqualTo(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'metrics-consumer'"));
      assertThat(gauge(IdemGauges.PARKED)).isEqualTo(parked); // still parked: counted in both
      assertThat(gauge(IdemGauges.PENDING)).isEqualTo(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'P'")).isZero();
      assertThat(gauge(IdemGauges.OLDEST_PENDING)).isZero();
    }
    assertThat(registry.find(IdemGauges.PENDING).gauge()).isNull(); // close() removed them
  }

  /** The id of a parked message, as text (as the relay puts it in the message's id header). */
  String firstParkedId() {
    try (java.sql.Connection c = ds.getConnection(); java.sql.Statement st = c.createStatement();
        java.sql.ResultSet rs = st.executeQuery("SELECT id FROM idem_outbox WHERE status = 'X' ORDER BY id")) {
      rs.next();
      return rs.getString(1);
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  double gauge(String name) {
    Gauge g = registry.find(name).gauge();
    return g.value();
  }

  @Test
  void anObservedExecutorPutsEachCallInAnObservationWithItsOutcome() throws Exception {
    ObservationRegistry observations = ObservationRegistry.create();
    observations.observationConfig().observationHandler(new DefaultMeterObservationHandler(registry));
    ObservedExecutor payments = ObservedExecutor.of(idem.executor().build(), "payments", observations);
    IdempotencyKey key = IdempotencyKey.of("observed", "o-1");
    assertThat(payments.execute(key, Fingerprint.of("a"), Codec.utf8(), tx -> "first").applied()).isTrue();
    assertThat(payments.execute(key, Fingerprint.of("a"), Codec.utf8(), tx -> "second").value()).isEqualTo("first");
    assertThatThrownBy(() -> payments.execute(IdempotencyKey.of("observed", "o-2"), Fingerprint.of("b"), Codec.utf8(), tx -> {
      throw new java.io.IOException("effect failed");
    })).isInstanceOf(java.io.IOException.class);
    assertThat(registry.find(ObservedExecutor.NAME).tags("executor", "payments", "outcome", "applied").timer().count()).isEqualTo(1);
    assertThat(registry.find(ObservedExecutor.NAME).tags("executor", "payments", "outcome", "replayed").timer().count()).isEqualTo(1);
    assertThat(registry.find(ObservedExecutor.NAME).tags("executor", "payments", "outcome", "error").timer().count()).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'observed'")).isEqualTo(1); // the failed one rolled back
  }

  @Test
  void theIntentKeyHopAndOutcomeAreOnTheSpans_andTheKeyOnNoMeter() throws Exception {
    List<io.micrometer.observation.Observation.Context> stopped = new CopyOnWriteArrayList<>();
    ObservationRegistry observations = ObservationRegistry.create();
    observations.observationConfig().observationHandler(new DefaultMeterObservationHandler(registry));
    observations.observationConfig().observationHandler(new io.micrometer.observation.ObservationHandler<>() {
      @Override
      public boolean supportsContext(io.micrometer.observation.Observation.Context context) {
        return true;
      }

      @Override
      public void onStop(io.micrometer.observation.Observation.Context context) {
        stopped.add(context);
      }
    });
    ObservedExecutor orders = ObservedExecutor.of(idem.executor().build(), "orders", observations);
    IdempotencyKey key = IdempotencyKey.of("shop", "order-9");
    orders.execute(key, Fingerprint.of("9"), Codec.utf8(), tx -> {
      idem.outbox().enqueue(NewMessage.of("orders", "placed".getBytes(StandardCharsets.UTF_8)));
      return "placed";
    });
    try (Relay relay = idem.relay(ObservedPublisher.wrap(m -> { }, observations)).build()) {
      relay.runOnce();
    }
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'S'")).isEqualTo(1);
    var execute = stopped.stream().filter(c -> c.getName().equals(ObservedExecutor.NAME)).findFirst().orElseThrow();
    var publish = stopped.stream().filter(c -> c.getName().equals(ObservedPublisher.NAME)).findFirst().orElseThrow();
    for (var span : List.of(execute, publish)) {
      assertThat(span.getHighCardinalityKeyValue(ObservedExecutor.INTENT).getValue()).isEqualTo("shop:order-9");
      assertThat(span.getLowCardinalityKeyValues().stream().map(kv -> kv.getKey())).doesNotContain(ObservedExecutor.INTENT);
    }
    assertThat(execute.getLowCardinalityKeyValue("hop").getValue()).isEqualTo(ObservedExecutor.HOP);
    assertThat(execute.getLowCardinalityKeyValue("outcome").getValue()).isEqualTo("applied");
    assertThat(publish.getLowCardinalityKeyValue("hop").getValue()).isEqualTo(ObservedPublisher.HOP);
    assertThat(publish.getLowCardinalityKeyValue("outcome").getValue()).isEqualTo("published");
    // low cardinality: the key is on no meter, as a tag's key or value
    assertThat(registry.getMeters()).isNotEmpty().allSatisfy(m -> assertThat(m.getId().getTags())
        .noneMatch(t -> t.getKey().equals(ObservedExecutor.INTENT) || t.getValue().contains("order-9")));
  }

  @Test
  void anObservedBatchingPublisherStillGetsTheWholeBatchOnceAndEachMessageItsSpan() throws Exception {
    Outbox outbox = idem.outbox();
    idem.inTransaction(tx -> {
      for (int i = 0; i < 4; i++) {
        outbox.enqueue(tx.connection(), NewMessage.of(i == 3 ? "broken" : "orders", ("m" + i).getBytes(StandardCharsets.UTF_8)));
      }
      return null;
    });
    List<Integer> batches = new CopyOnWriteArrayList<>();
    Publisher batching = new Publisher() {
      @Override
      public void publish(OutboxMessage message) {
        throw new AssertionError("a batching publisher is handed batches, never one message");
      }

      @Override
      public List<Throwable> publishAll(List<OutboxMessage> batch) {
        batches.add(batch.size());
        return batch.stream().map(m -> m.topic().equals("broken") ? (Throwable) new IllegalStateException("refused") : null).toList();
      }
    };
    ObservationRegistry observations = ObservationRegistry.create();
    observations.observationConfig().observationHandler(new DefaultMeterObservationHandler(registry));
    try (Relay relay = idem.relay(ObservedPublisher.wrap(batching, observations)).batchSize(10).maxAttempts(1).build()) {
      relay.runOnce();
    }
    assertThat(batches).containsExactly(4);
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'S'")).isEqualTo(3);
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE status = 'X'")).isEqualTo(1);
    assertThat(registry.find(ObservedPublisher.BATCH_NAME).timer().count()).isEqualTo(1);
    assertThat(registry.find(ObservedPublisher.NAME).tags("topic", "orders", "error", "none").timer().count()).isEqualTo(3);
    assertThat(registry.find(ObservedPublisher.NAME).tags("topic", "broken", "error", "IllegalStateException").timer().count()).isEqualTo(1);
  }

  @Test
  void aFailedRefreshKeepsTheLastValues() {
    db.execute(mariadb() ? "INSERT INTO idem_outbox (id, topic, payload, status) VALUES (UUID(), 't', X'00', 'X')"
        : "INSERT INTO idem_outbox (id, topic, payload, status) VALUES (gen_random_uuid(), 't', '\\x00', 'X')");
    HikariDataSource doomed = db.dataSource(1);
    try (IdemGauges gauges = IdemGauges.start(Idem.builder(doomed).build().operations(), registry, Duration.ofHours(1))) {
      assertThat(gauges.refresh()).isTrue();
      assertThat(gauge(IdemGauges.PARKED)).isEqualTo(1);
      doomed.close();
      assertThat(gauges.refresh()).isFalse();
      assertThat(gauge(IdemGauges.PARKED)).isEqualTo(1);
      assertThat(gauge(IdemGauges.PENDING)).isZero();
    }
  }

  @Test
  void badArgumentsAreRefusedClearly() {
    var operations = idem.operations();
    assertThatThrownBy(() -> IdemMetrics.of(null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("registry");
    assertThatThrownBy(() -> IdemGauges.start(operations, registry, Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("interval must be positive");
    assertThatThrownBy(() -> IdemGauges.start(operations, registry, Duration.ofDays(2)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at most");
    assertThatThrownBy(() -> IdemGauges.start(null, registry)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> ObservedPublisher.wrap(m -> {}, null)).isInstanceOf(IllegalArgumentException.class);
    assertThat(registry.getMeters()).isEmpty();
  }
}
