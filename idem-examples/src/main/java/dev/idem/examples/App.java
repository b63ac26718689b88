package dev.idem.examples;

import dev.idem.http.client.CallPolicy;
import dev.idem.http.client.CallRetryBudget;
import dev.idem.http.client.IntentKeys;
import dev.idem.http.client.OwnApiCalls;
import dev.idem.http.client.ProviderCalls;
import dev.idem.http.client.Reply;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;

/**
 * The buyer's app: one tap on Pay is one call of {@link #pay}. It retries when the reply is lost or
 * the answer is a 5xx (or 409 "in flight").
 *
 * <p>Fault ({@link Hop#APP}): the first reply is lost on its way to the phone (a mobile timeout).
 * Guard: the same {@code Idempotency-Key} on every retry of one tap, kept by idem's client
 * ({@link OwnApiCalls}, the key stored before the first send); unguarded, each try mints a fresh
 * key, which is what a client that builds the key per request does.
 */
final class App {
  static final int MAX_TRIES = 4;

  private final URI payments;
  private final Tally tally;
  private final HttpClient http = Http.client();
  private final OwnApiCalls client;

  /** {@code keys}: where the guarded app keeps each tap's key (the lab's database). */
  App(URI payments, Tally tally, IntentKeys keys) {
    this.payments = payments;
    this.tally = tally;
    // A budget of its own per run, and short back-offs, to keep the lab quick.
    this.client = OwnApiCalls.of(keys, ProviderCalls.of(CallPolicy.builder().maxAttempts(MAX_TRIES)
        .backoff(Duration.ofMillis(10), Duration.ofMillis(50)).build(), CallRetryBudget.standard()));
  }

  /** One tap on Pay. Returns the payment id the app finally saw, or null if it gave up. */
  String pay(String orderId, int amountCents) throws InterruptedException {
    if (tally.setup().guarded(Hop.APP)) {
      return payWithTheClient(orderId, amountCents);
    }
    String key = newKey();
    for (int attempt = 1; attempt <= MAX_TRIES; attempt++) {
      if (attempt > 1) {
        key = newKey();
        tally.note(Hop.APP, "retries with a fresh key " + PaymentProvider.abbreviate(key));
      }
      Http.Reply reply;
      try {
        reply = send(key, orderId, amountCents);
      } catch (LostReply e) {
        continue; // the fault noted it
      } catch (IOException e) {
        tally.note(Hop.APP, "no reply: " + e);
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

  /**
   * The guard: idem's client ({@link OwnApiCalls}) mints the tap's key once, stores it in {@code
   * idem_intent_keys} before the first send, and retries (a lost reply, a 409, a 5xx) with it only;
   * an app restarted mid-tap would find the same key there.
   */
  private String payWithTheClient(String orderId, int amountCents) throws InterruptedException {
    String intent = "order-" + orderId + "/pay";
    try {
      Http.Reply reply = client.call(intent, (header, key, attempt) -> {
        if (attempt > 1) {
          tally.note(Hop.APP, "retries with the same key " + PaymentProvider.abbreviate(key)
              + " (idem's client: stored in idem_intent_keys before the first send)");
        }
        Http.Reply r = send(key, orderId, amountCents);
        if (!r.ok()) {
          tally.note(Hop.APP, "got " + r.status() + " " + r.body().getOrDefault("error", ""));
        }
        return Reply.of(r, r.status(), r.header("Retry-After"));
      });
      return reply.ok() ? reply.body().get("payment_id") : null;
    } catch (IOException e) {
      tally.note(Hop.APP, "gave up: " + e.getMessage() + "; the key stays stored for the next tap");
      return null;
    }
  }

  /** One request; the lost-reply fault loses the reply on its way back, as an exception. */
  private Http.Reply send(String key, String orderId, int amountCents) throws IOException, InterruptedException {
    Http.Reply reply = Http.post(http, payments, Map.of("Idempotency-Key", key),
        Map.of("order_id", orderId, "amount_cents", Integer.toString(amountCents)));
    if (tally.fire(Hop.APP, "the reply (" + reply.status() + ") is lost on the way to the phone")) {
      throw new LostReply();
    }
    return reply;
  }

  /** The reply the lost-reply fault took: to the app, an I/O failure like any lost reply. */
  private static final class LostReply extends IOException {
    private static final long serialVersionUID = 1L;

    LostReply() {
      super("the reply was lost");
    }
  }

  private static String newKey() {
    return "tap-" + UUID.randomUUID();
  }
}
