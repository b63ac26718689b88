package dev.idem.examples;

import com.sun.net.httpserver.HttpExchange;
import dev.idem.http.IdempotencyKeyFilter;
import dev.idem.http.WebhookDelivery;
import dev.idem.http.WebhookReceiver;
import dev.idem.http.WebhookSignature;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import dev.idem.window.RepeatSource;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.UUID;

/**
 * The payments service: {@code POST /payments} records a payment and, in the same transaction,
 * writes a {@code payment.created} message to the outbox; {@code POST /webhooks/provider} receives
 * the provider's events and sends the receipt email (a row in {@code shop.receipt_emails}; on MariaDB {@code receipt_emails}, see
 * {@link LabSql}).
 *
 * <p>Guards: with {@link Hop#SERVICE} the payment runs through the idempotent executor under the
 * request's {@code Idempotency-Key} (a repeat gets the first payment back); with {@link
 * Hop#WEBHOOK} each delivery goes through a {@link WebhookReceiver}: its Svix signature is checked,
 * its event id claimed in an inbox with the receipt in one transaction, so a redelivered event
 * sends no second email.
 */
final class PaymentsService implements AutoCloseable {
  /** The key scope of payment requests: keys are compared within it only. */
  static final String KEY_SCOPE = "payments";

  private final Idem idem;
  private final LabSql sql;
  /** "Sends" the receipt: the lab counts emails in a table instead of sending them. */
  private final String receipt;
  private final Tally tally;
  private final IdempotentExecutor executor;
  private final WebhookReceiver webhooks;
  private final Http.Server server;

  PaymentsService(Idem idem, LabSql sql, Tally tally) {
    this.idem = idem;
    this.sql = sql;
    this.receipt = "INSERT INTO " + sql.shop("receipt_emails") + " (payment_ref, charge_id, event_id) VALUES (?, ?, ?)";
    this.tally = tally;
    // A client retries within a day; the provider retries a webhook for up to 3 days.
    this.executor = idem.executor().name("executor:payments").window(DedupeWindow.covering(RepeatSource.CLIENT_RETRY)).build();
    this.webhooks = WebhookReceiver.builder(idem, "provider-webhooks", WebhookSignature.svix(PaymentProvider.WEBHOOK_SECRET))
        .window(DedupeWindow.covering(RepeatSource.WEBHOOK_RETRIES))
        .build();
    this.server = Http.serve("payments", Map.of("/payments", this::pay, "/webhooks/provider", this::webhook));
  }

  URI paymentsUri() {
    return server.uri("/payments");
  }

  URI webhookUri() {
    return server.uri("/webhooks/provider");
  }

  private void pay(HttpExchange exchange) throws IOException {
    Map<String, String> form = Http.body(exchange);
    String orderId = form.getOrDefault("order_id", "");
    int amount;
    IdempotencyKey key;
    try {
      amount = Integer.parseInt(form.getOrDefault("amount_cents", ""));
      key = IdempotencyKey.of(KEY_SCOPE, String.valueOf(exchange.getRequestHeaders().getFirst("Idempotency-Key")));
    } catch (IllegalArgumentException e) {
      Http.respond(exchange, 400, Map.of(), Map.of("error", String.valueOf(e.getMessage())));
      return;
    }
    if (!tally.setup().guarded(Hop.SERVICE)) {
      String paymentId = idem.inTransaction(tx -> createPayment(tx, orderId, amount, key));
      Http.respond(exchange, 201, Map.of(), Map.of("payment_id", paymentId));
      return;
    }
    // The fingerprint is what the key promises to mean: the same key with another order is refused.
    Fingerprint fingerprint = Fingerprint.ofFields(Map.of("order_id", orderId, "amount_cents", amount));
    Execution<String> run;
    try {
      run = executor.execute(key, fingerprint, Codec.utf8(), tx -> createPayment(tx, orderId, amount, key));
    } catch (KeyReuseException e) {
      Http.respond(exchange, 422, Map.of(), Map.of("error", String.valueOf(e.getMessage())));
      return;
    }
    if (run instanceof Execution.InFlight<String> inFlight) {
      long seconds = Math.max(1, inFlight.retryAfter().toSeconds());
      Http.respond(exchange, 409, Map.of("Retry-After", Long.toString(seconds)), Map.of("error", "in flight"));
      return;
    }
    if (run.replayed()) {
      tally.caught(Hop.SERVICE, "key table replays payment " + run.value() + " for key " + PaymentProvider.abbreviate(key.value()));
      Http.respond(exchange, 201, Map.of("Idempotent-Replayed", "true"), Map.of("payment_id", run.value()));
      return;
    }
    Http.respond(exchange, 201, Map.of(), Map.of("payment_id", run.value()));
  }

  /** The local effect: one payment row and its outbox message, in the transaction open on this thread (the executor's). */
  private String createPayment(Tx tx, String orderId, int amount, IdempotencyKey key) {
    String paymentId = "pay_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    tx.dsl().execute("INSERT INTO " + sql.shop("payments") + " (id, order_id, amount_cents, idempotency_key) VALUES (?, ?, ?, ?)",
        paymentId, orderId, amount, key.value());
    idem.outbox().enqueue(NewMessage.of("payment.created", paymentId.getBytes(StandardCharsets.UTF_8))
        .withAggregateKey(orderId)
        .withHeader("amount_cents", Integer.toString(amount)));
    tally.note(Hop.SERVICE, "payment row " + paymentId + " written (order " + orderId + ")");
    return paymentId;
  }

  private void webhook(HttpExchange exchange) throws IOException {
    byte[] bytes;
    try (var in = exchange.getRequestBody()) {
      bytes = in.readAllBytes();
    }
    WebhookDelivery delivery = WebhookDelivery.of(exchange.getRequestHeaders(), bytes);
    Map<String, String> form = Http.decode(new String(bytes, StandardCharsets.UTF_8));
    String eventId = delivery.header("svix-id");
    String paymentRef = form.getOrDefault("payment_ref", "");
    String chargeId = form.getOrDefault("charge_id", "");
    if (!tally.setup().guarded(Hop.WEBHOOK)) {
      if (eventId == null || eventId.isBlank()) {
        Http.respond(exchange, 400, Map.of(), Map.of("error", "svix-id header is missing"));
        return;
      }
      idem.useTransaction(tx -> tx.dsl().execute(receipt, paymentRef, chargeId, eventId));
      noteReceipt(eventId, paymentRef);
      Http.respond(exchange, 200, Map.of(), Map.of());
      return;
    }
    // The signature checked, the event id claimed in the inbox and the receipt written, in one
    // transaction: a copy of the event never writes it.
    WebhookReceiver.Answer answer;
    try {
      answer = webhooks.receive(delivery, (tx, d) -> tx.dsl().execute(receipt, paymentRef, chargeId, eventId));
    } catch (Exception e) {
      throw new IOException("the receipt of event " + eventId + " failed; the provider delivers it again", e);
    }
    if (answer.status() == 200 && answer.headers().containsKey(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)) {
      tally.caught(Hop.WEBHOOK, "webhook inbox drops event " + eventId + ": already handled");
    } else if (answer.status() == 200) {
      noteReceipt(eventId, paymentRef);
    }
    byte[] body = answer.body().getBytes(StandardCharsets.UTF_8);
    answer.headers().forEach((k, v) -> exchange.getResponseHeaders().add(k, v));
    exchange.sendResponseHeaders(answer.status(), body.length == 0 ? -1 : body.length);
    if (body.length > 0) {
      try (var out = exchange.getResponseBody()) {
        out.write(body);
      }
    }
  }

  private void noteReceipt(String eventId, String paymentRef) {
    tally.note(Hop.WEBHOOK, "receipt email for " + paymentRef + " (event " + eventId + ")");
  }

  @Override
  public void close() {
    server.close();
  }
}
