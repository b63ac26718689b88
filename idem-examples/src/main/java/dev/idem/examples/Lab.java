package dev.idem.examples;

import dev.idem.flyway.IdemFlyway;
import dev.idem.http.client.IntentKeys;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.outbox.Publisher;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.jdbc.reconcile.Findings;
import dev.idem.jdbc.reconcile.TwoIdsForOneIntent;
import dev.idem.micrometer.IdemMetrics;
import dev.idem.testing.TestDatabase;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.DistributionSummary;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.jooq.Record;
import org.jooq.impl.DSL;

/**
 * One run of the double-charge lab: a fresh database, the six hops wired over real HTTP on
 * loopback, one tap on Pay for a $40 order, then everything drained (outbox relay, queue, worker,
 * the provider's webhooks) and the counts read from the database.
 *
 * <pre>
 *  app --HTTP--> balancer --HTTP--> payments service --(outbox, relay)--> queue --> worker
 *                                     ^                                             |
 *                                     |  webhook (HTTP)                  charge (HTTP)
 *                                     +------------------ provider <---------------+
 * </pre>
 */
public final class Lab {
  /** The order and amount of the seed's story. */
  static final String ORDER = "order-40";
  static final int AMOUNT_CENTS = 4000;

  private static final Duration DRAIN_TIMEOUT = Duration.ofSeconds(60);

  /** How far back reconciliation asks the provider for its charges: every run's, in a database of its own. */
  static final Duration PROVIDER_RANGE = Duration.ofHours(1);

  /** Reads the run's database after the lab's own counts, before it is dropped (for tests); {@code sql} names its tables. */
  @FunctionalInterface
  interface AfterRun {
    void read(DataSource serviceDb, LabSql sql) throws Exception;
  }

  /** The setting of idem's test fixture that chooses the database of {@link TestDatabase#newDatabase}. */
  static final String DATABASE_PROPERTY = "IDEM_TEST_DATABASE";

  private Lab() {}

  /**
   * Makes every run of this JVM take its database on {@code vendor}'s server: the fixture's own
   * setting ({@value #DATABASE_PROPERTY}), as a system property, which wins over the environment.
   */
  static void useDatabase(TestDatabase.Vendor vendor) {
    System.setProperty(DATABASE_PROPERTY, vendor == TestDatabase.Vendor.MARIADB ? "mariadb" : "postgresql");
  }

  /**
   * Runs the lab once with {@code setup}, in its own database on the fixture's server, which is
   * dropped afterwards: PostgreSQL (embedded unless {@code IDEM_JDBC_URL} is set) or MariaDB, as
   * {@link TestDatabase#newDatabase} chooses ({@code --db} sets it, see {@link Tour}).
   */
  public static RunResult run(String scenario, Setup setup) throws Exception {
    return run(scenario, setup, (ds, sql) -> {});
  }

  static RunResult run(String scenario, Setup setup, AfterRun afterRun) throws Exception {
    Tally tally = new Tally(setup);
    LabListener listener = new LabListener();
    MeterRegistry meters = new SimpleMeterRegistry(); // a fresh one per run: the meters count this run only
    try (TestDatabase db = TestDatabase.newDatabase("lab")) {
      LabSql sql = LabSql.of(db);
      HikariDataSource serviceDb = serviceDatabase(db);
      Idem idem = Idem.builder(serviceDb).listener(new BothListeners(listener, IdemMetrics.of(meters))).build();
      LabQueue queue = LabQueue.open();
      Publisher toQueue = m -> {
        queue.publish(m.id().toString(), m.topic(), m.payload(), m.headers());
        tally.note(Hop.SERVICE, "relay publishes message " + Worker.short8(m.id().toString()) + " (attempt " + m.attempt() + ")");
        if (tally.fire(Hop.SERVICE, "the broker's ack of " + Worker.short8(m.id().toString()) + " is lost after publishing; it stays unsent")) {
          throw new RelayCrash();
        }
      };
      // The provider is another company: its own pool and schema (on MariaDB its own database).
      try (queue; PaymentProvider provider = PaymentProvider.open(db, 4, tally);
          PaymentsService service = new PaymentsService(idem, sql, tally);
          LoadBalancer balancer = new LoadBalancer(service.paymentsUri(), tally)) {
        provider.webhook(service.webhookUri());
        // A failed publish is retried after a short back-off (default 1 s), to keep the lab quick.
        Relay relay = idem.relay(toQueue).batchSize(10).pollInterval(Duration.ofMillis(20)).maxAttempts(10)
            .backoff(Duration.ofMillis(10), Duration.ofMillis(50)).build();
        try {
          Worker worker = new Worker(idem, sql, queue, provider.chargesUri(), tally);
          new App(balancer.paymentsUri(), tally, IntentKeys.database(idem)).pay(ORDER, AMOUNT_CENTS);
          drain(idem, relay, queue, worker);
          provider.awaitWebhooks(DRAIN_TIMEOUT);
        } finally {
          relay.close();
        }
        RunResult result = result(scenario, setup, sql, serviceDb, provider, tally, listener, moved(meters),
            idem.reconciliation().check(sql.paymentsByOrder(), provider, PROVIDER_RANGE), idem.lineage().check(PROVIDER_RANGE));
        afterRun.read(serviceDb, sql);
        return result;
      }
    }
  }

  /**
   * Thrown by the lab's publisher after the message reached the queue: the relay takes it as a
   * failed publish (a lost broker ack), records the attempt and its error, and publishes the same
   * message id again after its back-off (as attempt 2). A relay that died between publish and "mark
   * sent" would record nothing and publish it again as attempt 1; the queue gets it twice either way.
   */
  static final class RelayCrash extends RuntimeException {
    RelayCrash() {
      super("relay crashed after publishing, before marking the message sent");
    }
  }

  /** Runs the relay and the worker until the outbox has nothing pending and the queue is empty. */
  private static void drain(Idem idem, Relay relay, LabQueue queue, Worker worker) throws Exception {
    long deadline = System.nanoTime() + DRAIN_TIMEOUT.toNanos();
    while (true) {
      // The relay catches a publisher's RelayCrash itself (a failed publish): runOnce never throws it.
      int published = relay.runOnce();
      int taken = worker.drain();
      if (published == 0 && taken == 0) {
        if (queue.isEmpty() && idem.operations().outboxStats().pending() == 0) {
          return;
        }
        Thread.sleep(20); // a failed publish is retried after the relay's backoff
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the outbox and queue did not drain in " + DRAIN_TIMEOUT);
      }
    }
  }

  /**
   * The payments service's pool on {@code db}, with idem's tables (schema {@code idem}; on MariaDB
   * the database itself) and the shop's ({@link #createShop}): what every run of the lab, and {@code
   * --prove}, starts the service on.
   */
  static HikariDataSource serviceDatabase(TestDatabase db) throws SQLException {
    HikariDataSource serviceDb = db.dataSource(8);
    IdemFlyway.migrate(serviceDb);
    createShop(serviceDb, LabSql.of(db));
    return serviceDb;
  }

  /** The service's own tables (schema {@code shop}; on MariaDB beside idem's, see {@link LabSql}). */
  static void createShop(DataSource ds, LabSql sql) throws SQLException {
    try (Connection c = ds.getConnection()) {
      var dsl = DSL.using(c, sql.dialect());
      sql.shopTables().forEach(dsl::execute);
    }
  }

  /**
   * The meters that moved, as {@code name{source=..,tag=..}} (source first: it is the hop) to their
   * count, sorted. IdemMetrics makes counters, timers and distribution summaries only; of a timer or
   * summary the lab shows how many it recorded ({@code .count}, as Prometheus' {@code _count}), since
   * the times differ on every run.
   */
  static SortedMap<String, Long> moved(MeterRegistry registry) {
    SortedMap<String, Long> out = new TreeMap<>();
    for (Meter m : registry.getMeters()) {
      long count = m instanceof Counter c ? (long) c.count()
          : m instanceof Timer t ? t.count()
          : m instanceof DistributionSummary d ? d.count()
          : 0;
      if (count > 0) {
        String tags = m.getId().getTags().stream()
            .sorted(Comparator.comparing((Tag tag) -> !tag.getKey().equals("source")).thenComparing(Tag::getKey))
            .map(tag -> tag.getKey() + "=" + tag.getValue()).collect(Collectors.joining(","));
        out.put(m.getId().getName() + (m instanceof Counter ? "" : ".count") + "{" + tags + "}", count);
      }
    }
    return out;
  }

  /** The counts: the service's payment rows and receipt emails, and the charges in the provider's own tables. */
  private static RunResult result(String scenario, Setup setup, LabSql sql, DataSource ds, PaymentProvider provider,
      Tally tally, LabListener listener, SortedMap<String, Long> meters, Findings findings,
      List<TwoIdsForOneIntent> lineage) throws SQLException {
    try (Connection c = ds.getConnection()) {
      Record counts = DSL.using(c, sql.dialect()).fetchOne("SELECT"
          + " (SELECT count(*) FROM " + sql.shop("payments") + "),"
          + " (SELECT count(*) FROM " + sql.shop("receipt_emails") + ")");
      return new RunResult(scenario, setup,
          counts.get(0, Integer.class), provider.charges(), counts.get(1, Integer.class),
          tally.firedByHop(), tally.caughtByHop(), listener.snapshot(), meters, findings, lineage, tally.trace());
    }
  }
}
