package dev.idem.examples.boot;

import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code POST /webhooks/card-provider}: the provider sends no {@code Idempotency-Key}, so this
 * route is not annotated and the HTTP filter lets it through; the event's own id is the key, in
 * {@link ProviderEvents}. A failure answers 503, and the provider delivers the event again.
 */
@RestController
class ProviderWebhook {
  private final ProviderEvents events;

  ProviderWebhook(ProviderEvents events) {
    this.events = events;
  }

  @PostMapping("/webhooks/card-provider")
  ProviderEvents.Applied receive(@RequestBody ProviderEvents.Event event) {
    return events.apply(event);
  }

  @ExceptionHandler(IllegalStateException.class)
  ResponseEntity<String> notYet(IllegalStateException e) {
    return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE).body(e.getMessage());
  }
}
