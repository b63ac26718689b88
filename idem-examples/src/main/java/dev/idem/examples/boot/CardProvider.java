package dev.idem.examples.boot;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.idem.http.client.ProviderCalls;
import dev.idem.key.IdempotencyKey;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.stereotype.Component;

/**
 * The card provider's API ({@code POST /charges}), called with the charge's call key as its
 * {@code Idempotency-Key}: a lost reply is retried with the same key, and the provider answers the
 * retry from its record instead of charging again.
 */
@Component
class CardProvider {
  private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
  private final ProviderCalls calls = ProviderCalls.withDefaults();
  private final ObjectMapper json = new ObjectMapper();
  private final URI charges;

  CardProvider(@Value("${payments.provider-url}") URI provider) {
    this.charges = provider.resolve("/charges");
  }

  Checkout.Charge charge(IdempotencyKey callKey, int amount) throws IOException {
    HttpRequest request = HttpRequest.newBuilder(charges).timeout(Duration.ofSeconds(5))
        .header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofString("{\"amount\":" + amount + "}")).build();
    HttpResponse<String> r;
    try {
      r = calls.send(http, request, callKey, HttpResponse.BodyHandlers.ofString());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while charging " + callKey);
    }
    JsonNode body = json.readTree(r.body());
    if (r.statusCode() == 402) {
      return new Checkout.Charge(null, body.path("reason").asText("declined"));
    }
    if (r.statusCode() / 100 != 2) {
      // Unknown outcome: the exception ends the charge's lease, and a retry sends the same key.
      throw new IOException("provider answered " + r.statusCode() + ": " + r.body());
    }
    return new Checkout.Charge(body.path("id").asText(), null);
  }
}
