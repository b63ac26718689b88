package dev.idem.examples.boot;

import dev.idem.result.InFlightException;
import dev.idem.spring.Idempotent;
import java.net.URI;
import java.util.Map;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code POST /payments}, guarded by {@link Idempotent}: it runs once per merchant and {@code
 * Idempotency-Key} (the merchant is the {@code X-Merchant-Id} header the gateway sets, {@code
 * idem.http.scope-header}), in the Spring transaction the key commits in, and every repeat gets the
 * first response (a 201, or a stored 402 decline) back. Nothing else here knows about keys.
 */
@RestController
class PaymentsController {
  private final Checkout checkout;

  PaymentsController(Checkout checkout) {
    this.checkout = checkout;
  }

  record PaymentRequest(String order, int amount) {}

  @Idempotent
  @PostMapping("/payments")
  ResponseEntity<Map<String, Object>> pay(@RequestBody PaymentRequest request) {
    if (request.order() == null || request.order().isBlank() || request.amount() <= 0) {
      // not stored: the client fixes the request and sends the same key again
      return ResponseEntity.badRequest().body(Map.of("error", "order and a positive amount are required"));
    }
    Checkout.Result r = checkout.pay(request.order(), request.amount());
    if (r.declined()) {
      return ResponseEntity.status(HttpStatus.PAYMENT_REQUIRED).body(Map.of("order", request.order(), "declined", r.reason()));
    }
    return ResponseEntity.created(URI.create("/payments/" + request.order()))
        .body(Map.of("order", request.order(), "charge", r.chargeId()));
  }

  /** Another request (another key) is charging this order right now: 409, not stored, retry later. */
  @ExceptionHandler(InFlightException.class)
  ResponseEntity<Map<String, Object>> chargeInFlight(InFlightException e) {
    return ResponseEntity.status(HttpStatus.CONFLICT)
        .header("Retry-After", Long.toString(Math.max(1, e.retryAfter().toSeconds())))
        .body(Map.of("error", "this order is being charged by another request"));
  }
}
