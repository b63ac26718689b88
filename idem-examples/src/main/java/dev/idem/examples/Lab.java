package dev.idem.examples;

import dev.idem.flyway.IdemFlyway;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.outbox.Publisher;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import javax.sql.DataSource;
import org.jooq.Record;
import org.jooq.SQLDialect;
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

  private Lab() {}

  /**
   * Runs the lab once with {@code setup}, in its own database on the fixture's server (embedded
   * Postgres unless {@code IDEM_JDBC_URL} is set), which is dropped afterwards.
   */
  public static RunResult run(String scenario, Setup setup) throws Exception {
    Tally tally = new Tally(setup);
    LabListener listener = new LabListener();
    try (TestDatabase db = TestPostgres.newDatabase("lab")) {
      HikariDataSource serviceDb = db.dataSource(8);
      HikariDataSource providerDb = db.dataSource(4); // another company: its own pool and schema
      Idem idem = Idem.builder(serviceDb).listener(listener).build();
      IdemFlyway.migrate(serviceDb);
      createShop(serviceDb);
      LabQueue queue = new LabQueue();
      Publisher toQueue = m -> {
        queue.publish(m.id().toString(), m.topic(), m.payload(), m.headers());
        tally.note(Hop.SERVICE, "relay publishes message " + Worker.short8(m.id().toString()) + " (attempt " + m.attempt() + ")");
        if (tally.fire(Hop.SERVICE, "the broker's ack of " + Worker.short8(m.id().toString()) + " is lost after publishing; it stays unsent")) {
          throw new RelayCrash();
        }
      };
      try (PaymentProvider provider = new PaymentProvider(providerDb, tally);
          PaymentsService service = new PaymentsService(idem, tally);
          LoadBalancer balancer = new LoadBalancer(service.paymentsUri(), tally)) {
        provider.webhook(service.webhookUri());
        // A failed publish is retried after a short back-off (default 1 s), to keep the lab quick.
        Relay relay = idem.relay(toQueue).batchSize(10).pollInterval(Duration.ofMillis(20)).maxAttempts(10)
            .backoff(Duration.ofMillis(10), Duration.ofMillis(50)).build();
        try {
          Worker worker = new Worker(idem, queue, provider.chargesUri(), tally);
          new App(balancer.paymentsUri(), tally).pay(ORDER, AMOUNT_CENTS);
          drain(idem, relay, queue, worker);
          provider.awaitWebhooks(DRAIN_TIMEOUT);
        } finally {
          relay.close();
        }
        return result(scenario, setup, serviceDb, tally, listener);
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
        if (queue.isEmpty() && idem.outbox().countPending() == 0) {
          return;
        }
        Thread.sleep(20); // a failed publish is retried after the relay's backoff
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the outbox and queue did not drain in " + DRAIN_TIMEOUT);
      }
    }
  }

  /** The service's own tables (schema {@code shop}); idem's live in schema {@code idem}. */
  static void createShop(DataSource ds) throws SQLException {
    try (Connection c = ds.getConnection()) {
      var sql = DSL.using(c, SQLDialect.POSTGRES);
      sql.execute("CREATE SCHEMA IF NOT EXISTS shop");
      sql.execute("CREATE TABLE IF NOT EXISTS shop.payments ("
          + " id text PRIMARY KEY, order_id text NOT NULL, amount_cents integer NOT NULL,"
          + " idempotency_key text NOT NULL, status text NOT NULL DEFAULT 'PENDING', charge_id text,"
          + " created_at timestamptz NOT NULL DEFAULT now())");
      sql.execute("CREATE TABLE IF NOT EXISTS shop.receipt_emails ("
          + " id bigserial PRIMARY KEY, payment_ref text NOT NULL, charge_id text NOT NULL, event_id text NOT NULL,"
          + " sent_at timestamptz NOT NULL DEFAULT now())");
    }
  }

  private static RunResult result(String scenario, Setup setup, DataSource ds, Tally tally, LabListener listener)
      throws SQLException {
    try (Connection c = ds.getConnection()) {
      Record counts = DSL.using(c, SQLDialect.POSTGRES).fetchOne("SELECT"
          + " (SELECT count(*) FROM shop.payments),"
          + " (SELECT count(*) FROM provider.charges),"
          + " (SELECT count(*) FROM shop.receipt_emails)");
      return new RunResult(scenario, setup,
          counts.get(0, Integer.class), counts.get(1, Integer.class), counts.get(2, Integer.class),
          tally.firedByHop(), tally.caughtByHop(), listener.snapshot(), tally.trace());
    }
  }
}
