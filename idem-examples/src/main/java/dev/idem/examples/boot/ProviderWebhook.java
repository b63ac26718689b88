package dev.idem.examples.boot;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.idem.http.WebhookDelivery;
import dev.idem.http.WebhookReceiver;
import dev.idem.http.WebhookSignature;
import dev.idem.jdbc.Idem;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code POST /webhooks/card-provider}: the provider signs each delivery as Stripe does ({@code
 * Stripe-Signature}) and sends no {@code Idempotency-Key}, so this route is not annotated and the
 * HTTP filter lets it through. A {@link WebhookReceiver} checks the signature (a bad one: 401,
 * nothing written), claims the event's id in the inbox {@code card-provider} and runs {@link
 * ProviderEvents#apply} in one Spring transaction, and answers 200 at once for a redelivery. A
 * failure answers 503, and the provider delivers the event again.
 */
@RestController
class ProviderWebhook {
  private final WebhookReceiver receiver;
  private final ProviderEvents events;
  private final TransactionTemplate transactions;
  private final ObjectMapper json;

  ProviderWebhook(Idem idem, ProviderEvents events, PlatformTransactionManager transactions, ObjectMapper json,
      @Value("${payments.webhook-secret}") String secret) {
    // Provider webhooks come back for up to 3 days: the inbox's default window.
    this.receiver = WebhookReceiver.builder(idem, "card-provider", WebhookSignature.stripe(secret)).build();
    this.events = events;
    this.transactions = new TransactionTemplate(transactions);
    this.json = json;
  }

  @PostMapping("/webhooks/card-provider")
  ResponseEntity<String> receive(@RequestHeader HttpHeaders headers, @RequestBody byte[] body) {
    WebhookDelivery delivery = WebhookDelivery.of(headers, body);
    // In a Spring transaction, so ProviderEvents' JdbcTemplate writes commit with the event's inbox
    // row; the answer is sent after the commit, never before it.
    WebhookReceiver.Answer answer = transactions.execute(status -> {
      try {
        return receiver.receive(delivery, (tx, d) -> events.apply(json.readValue(d.body(), ProviderEvents.Event.class)));
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new IllegalStateException("event could not be read: " + e.getMessage(), e);
      }
    });
    HttpHeaders out = new HttpHeaders();
    answer.headers().forEach(out::set);
    return ResponseEntity.status(answer.status()).headers(out).body(answer.body());
  }

  @ExceptionHandler(IllegalStateException.class)
  ResponseEntity<String> notYet(IllegalStateException e) {
    return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE).body(e.getMessage());
  }
}
