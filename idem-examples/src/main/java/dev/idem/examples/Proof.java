package dev.idem.examples;

import static dev.idem.testing.Delivery.CONCURRENT;
import static dev.idem.testing.Delivery.FRESH_KEY;
import static dev.idem.testing.Delivery.KILLED_AFTER_COMMIT;
import static dev.idem.testing.Delivery.KILLED_BEFORE_COMMIT;
import static dev.idem.testing.Delivery.REPLY_LOST;

import dev.idem.jdbc.Idem;
import dev.idem.testing.Delivery;
import dev.idem.testing.Effects;
import dev.idem.testing.FaultyDataSource;
import dev.idem.testing.RepeatReport;
import dev.idem.testing.Repeats;
import dev.idem.testing.Targets;
import dev.idem.testing.TestDatabase;
import java.io.PrintStream;
import java.net.http.HttpRequest;
import java.sql.SQLException;
import java.util.Map;

/**
 * {@code --prove}: the lab's payments service proved with idem's test kit, as a user proves their
 * own (docs/testing.md). {@code Repeats} sends {@code POST /payments} every way a hop repeats it
 * and counts the payment rows per order, first with the service's guard off, then on.
 *
 * <p>Only the service runs: no relay and no worker, so the only commits on the service's pool are
 * the requests' own, which is what the killing deliveries count and kill. The outbox messages the
 * service writes stay unsent.
 */
final class Proof {
  /** The column of the payment rows that carries the intent: one payment row per order is one effect per intent. */
  static final String ORDER = "order_id";

  /** The two runs' reports, for a test to compare with the database. */
  record Reports(RepeatReport unguarded, RepeatReport guarded) {}

  private Proof() {}

  /** Proves the service on {@code db} (a new database of its own), printing both reports to {@code out}. */
  static Reports run(TestDatabase db, PrintStream out) throws SQLException {
    LabSql sql = LabSql.of(db);
    FaultyDataSource service = FaultyDataSource.wrap(Lab.serviceDatabase(db));
    Idem idem = Idem.builder(service).build();
    Effects payments = Effects.in(service, sql.shop("payments"), ORDER);
    out.println("idem double-charge lab, proved with idem's test kit (docs/testing.md): Repeats sends POST /payments"
        + " every way a hop repeats it and counts the payment rows per order");
    out.println("database: " + Tour.describeServer(db.vendor(), db.kind()));
    out.println();

    out.println("-- guard off (no key-table): every repeat that reaches the service is another payment");
    RepeatReport unguarded = prove(idem, sql, Setup.of("none", "none"), payments, service, CONCURRENT, REPLY_LOST);
    out.println(unguarded);
    out.println();

    out.println("-- guard on (key-table): one payment per order under every delivery within idem's guarantee;"
        + " FRESH_KEY is outside it");
    RepeatReport guarded = prove(idem, sql, Setup.of("none", "key-table"), payments, service,
        CONCURRENT, REPLY_LOST, KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT, FRESH_KEY);
    out.println(guarded);
    out.println();

    out.println("take away: with the key table, a repeat that carries the same key is harmless, even raced or killed at"
        + " its commit; a retry with a fresh key is a new payment to any server (the client-fresh-key scenario),"
        + " so mint the key once per tap, and prove your own service the same way");
    return new Reports(unguarded, guarded);
  }

  /** One run of {@code Repeats} against a payments service started with {@code setup}'s guards. */
  private static RepeatReport prove(Idem idem, LabSql sql, Setup setup, Effects payments, FaultyDataSource service,
      Delivery... deliveries) {
    try (PaymentsService shop = new PaymentsService(idem, sql, new Tally(setup))) {
      return Repeats.of(payments)
          .target(Targets.http(copy -> HttpRequest.newBuilder(shop.paymentsUri())
              .header("Idempotency-Key", copy.key())
              .header("Content-Type", "application/x-www-form-urlencoded")
              .POST(HttpRequest.BodyPublishers.ofString(Http.encode(
                  Map.of("order_id", copy.intent(), "amount_cents", Integer.toString(Lab.AMOUNT_CENTS)))))
              .build()))
          .faults(service)
          .deliver(deliveries)
          .run();
    }
  }
}
