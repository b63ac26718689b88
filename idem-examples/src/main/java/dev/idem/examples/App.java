package dev.idem.examples;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.util.Map;
import java.util.UUID;

/**
 * The buyer's app: one tap on Pay is one call of {@link #pay}. It retries when the reply is lost or
 * the answer is a 5xx (or 409 "in flight").
 *
 * <p>Fault ({@link Hop#APP}): the first reply is lost on its way to the phone (a mobile timeout).
 * Guard: the same {@code Idempotency-Key} on every retry of one tap; unguarded, each try mints a
 * fresh key, which is what a client that builds the key per request does.
 */
final class App {
  static final int MAX_TRIES = 4;

  private final URI payments;
  private final Tally tally;
  private final HttpClient client = Http.client();

  App(URI payments, Tally tally) {
    this.payments = payments;
    this.tally = tally;
  }

  /** One tap on Pay. Returns the payment id the app finally saw, or null if it gave up. */
  String pay(String orderId, int amountCents) throws InterruptedException {
    String key = newKey();
    for (int attempt = 1; attempt <= MAX_TRIES; attempt++) {
      if (attempt > 1) {
        if (tally.setup().guarded(Hop.APP)) {
          tally.note(Hop.APP, "retries with the same key " + PaymentProvider.abbreviate(key));
        } else {
          key = newKey();
          tally.note(Hop.APP, "retries with a fresh key " + PaymentProvider.abbreviate(key));
        }
      }
      Http.Reply reply;
      try {
        reply = Http.post(client, payments, Map.of("Idempotency-Key", key),
            Map.of("order_id", orderId, "amount_cents", Integer.toString(amountCents)));
      } catch (IOException e) {
        tally.note(Hop.APP, "no reply: " + e);
        continue;
      }
      if (tally.fire(Hop.APP, "the reply (" + reply.status() + ") is lost on the way to the phone")) {
        continue;
      }
      if (reply.ok()) {
        return reply.body().get("payment_id");
      }
      tally.note(Hop.APP, "got " + reply.status() + " " + reply.body().getOrDefault("error", ""));
      if (reply.status() == 409) {
        Thread.sleep(50); // in flight: the first copy is still running; ask again shortly
      } else if (reply.status() < 500) {
        return null; // a client error is not retried: the same request would fail the same way
      }
    }
    return null;
  }

  private static String newKey() {
    return "tap-" + UUID.randomUUID();
  }
}
