package dev.idem.spring;

import dev.idem.http.client.ProviderCalls;
import dev.idem.http.client.Reply;
import dev.idem.key.IdempotencyKey;
import java.io.IOException;
import java.io.InterruptedIOException;
import org.springframework.http.HttpRequest;
import org.springframework.http.client.ClientHttpRequestExecution;
import org.springframework.http.client.ClientHttpRequestInterceptor;
import org.springframework.http.client.ClientHttpResponse;

/**
 * {@link ProviderCalls} for Spring's {@code RestClient} (and {@code RestTemplate}): a request that
 * carries the policy's idempotency header ({@code Idempotency-Key} by default) is retried with that
 * same header value, with back-off, {@code Retry-After} and the shared retry budget; a request
 * without it is sent once and never retried, since a retry without a key could perform twice.
 *
 * <pre>{@code
 * RestClient stripe = RestClient.builder().baseUrl(url)
 *     .requestInterceptor(new ProviderCallsInterceptor(calls)).build();   // add it last
 * charges.executeExternal(key, fingerprint, codec, attempt -> stripe.post().uri("/charges")
 *     .header(calls.policy().header(), attempt.callKey().value())
 *     .body(charge).retrieve().body(Charge.class));
 * }</pre>
 *
 * <p>Add it last: a retry executes the rest of the chain again, and interceptors after this one
 * would see only the first attempt. The key must be the external attempt's call key, the same for
 * every attempt and takeover; see {@link ProviderCalls} for what is and is not guaranteed.
 */
public final class ProviderCallsInterceptor implements ClientHttpRequestInterceptor {
  private final ProviderCalls calls;

  /** Retries under {@code calls}' policy and budget (share one per provider). */
  public ProviderCallsInterceptor(ProviderCalls calls) {
    if (calls == null) {
      throw new IllegalArgumentException("calls must not be null");
    }
    this.calls = calls;
  }

  @Override
  public ClientHttpResponse intercept(HttpRequest request, byte[] body, ClientHttpRequestExecution execution) throws IOException {
    String key = request.getHeaders().getFirst(calls.policy().header());
    if (key == null) {
      return execution.execute(request, body);
    }
    try {
      return calls.call(IdempotencyKey.of("call", key), (header, value, attempt) -> {
        ClientHttpResponse r = execution.execute(request, body);
        return Reply.of(r, r.getStatusCode().value(), r.getHeaders().getFirst("Retry-After"));
      });
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while calling " + request.getURI() + " with " + calls.policy().header());
    }
  }
}
