package dev.idem.examples;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import dev.idem.window.RepeatSource;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.UUID;

/**
 * The worker: takes {@code payment.created} off the queue and charges the card at the provider.
 *
 * <p>Guards: with {@link Hop#QUEUE} it consumes through an inbox (the message id is claimed in the
 * same transaction as the worker's own writes, so a redelivered message is acknowledged without
 * effect); with {@link Hop#PROVIDER} the key it sends the provider is derived from the payment
 * ({@code Keys.attempt(Keys.child(payment, "charge"), 1)}), the same on every machine and every
 * redelivery; unguarded it sends a fresh key per call.
 *
 * <p>Fault ({@link Hop#PROVIDER}): the worker crashes after the charge, before its transaction
 * commits. The crash rolls back the inbox row and the payment's update, but not the charge: only
 * the provider can recognise the second call.
 */
final class Worker {
  /** Thrown to play a crash: the transaction rolls back and the message is not acknowledged. */
  static final class Crash extends RuntimeException {
    Crash(String message) {
      super(message);
    }
  }

  private final Idem idem;
  private final LabSql sql;
  private final Inbox inbox;
  private final LabQueue queue;
  private final URI provider;
  private final Tally tally;
  private final HttpClient client = Http.client();

  Worker(Idem idem, LabSql sql, LabQueue queue, URI provider, Tally tally) {
    this.idem = idem;
    this.sql = sql;
    this.queue = queue;
    this.provider = provider;
    this.tally = tally;
    // A dead-lettered message may be redriven two weeks later: remember its id that long.
    this.inbox = idem.inbox("charge-worker").window(DedupeWindow.covering(RepeatSource.DEAD_LETTER_REDRIVE)).build();
  }

  /** Handles deliveries until the queue is empty; returns how many it took. */
  int drain() throws Exception {
    int taken = 0;
    for (LabQueue.Delivery d; (d = queue.poll()) != null; ) {
      taken++;
      try {
        handle(d);
      } catch (Crash crash) {
        queue.redeliver(d); // no ack: the broker hands the message out again
        continue;
      }
      // Acknowledged. A lost ack makes the broker deliver it again anyway.
      if (tally.fire(Hop.QUEUE, "the ack of message " + short8(d.messageId()) + " is lost: the queue redelivers it")) {
        queue.redeliver(d);
      }
    }
    return taken;
  }

  private void handle(LabQueue.Delivery d) throws Exception {
    String paymentId = new String(d.payload(), StandardCharsets.UTF_8);
    int amount = Integer.parseInt(d.headers().getOrDefault("amount_cents", "0"));
    if (tally.setup().guarded(Hop.QUEUE)) {
      // the intent the payment was made for travels with the message: recorded, so a republish under a new id shows
      Execution<Void> outcome = inbox.receive(d.messageId(), d.headers().get(NewMessage.INTENT_HEADER),
          tx -> charge(tx, paymentId, amount));
      if (outcome.replayed()) {
        tally.caught(Hop.QUEUE, "inbox acknowledges message " + short8(d.messageId()) + " (delivery " + d.delivery() + "): already done");
      }
    } else {
      idem.useTransaction(tx -> charge(tx, paymentId, amount));
    }
  }

  /** The key sent to the provider for this payment's charge. */
  static String providerKey(String paymentId, boolean derived) {
    if (!derived) {
      return "charge-" + UUID.randomUUID();
    }
    // Derived, so every retry on any machine sends the same key; attempt 1 of this card.
    IdempotencyKey payment = IdempotencyKey.of(PaymentsService.KEY_SCOPE, paymentId);
    return Keys.attempt(Keys.child(payment, "charge"), 1).value();
  }

  private void charge(Tx tx, String paymentId, int amount) throws IOException, InterruptedException {
    String key = providerKey(paymentId, tally.setup().guarded(Hop.PROVIDER));
    Http.Reply reply = Http.post(client, provider, Map.of("Idempotency-Key", key),
        Map.of("amount_cents", Integer.toString(amount), "payment_ref", paymentId));
    if (!reply.ok()) {
      throw new IOException("provider answered " + reply.status() + " " + reply.body());
    }
    String chargeId = reply.body().get("charge_id");
    tx.dsl().execute("UPDATE " + sql.shop("payments") + " SET status = 'CHARGED', charge_id = ? WHERE id = ?", chargeId, paymentId);
    tally.note(Hop.PROVIDER, "worker charged " + paymentId + " -> " + chargeId + " with key " + PaymentProvider.abbreviate(key)
        + (reply.header("Idempotent-Replayed") != null ? " (replayed)" : ""));
    if (tally.fire(Hop.PROVIDER, "the worker crashes after charge " + chargeId + ", before its commit")) {
      throw new Crash("worker crashed after the charge");
    }
  }

  static String short8(String id) {
    return id.length() <= 8 ? id : id.substring(0, 8);
  }
}
