package dev.idem.spring;

import dev.idem.http.client.OwnApiCalls;
import dev.idem.http.client.Reply;
import java.io.IOException;
import java.io.InterruptedIOException;
import org.springframework.http.HttpRequest;
import org.springframework.http.client.ClientHttpRequestExecution;
import org.springframework.http.client.ClientHttpRequestInterceptor;
import org.springframework.http.client.ClientHttpResponse;

/**
 * {@link OwnApiCalls} for Spring's {@code RestClient}: a request that names its intent in the
 * request attribute {@value #INTENT} is sent with the intent's stored key (minted and stored
 * before the first send), retried with it, and the key released on a definitive answer, as {@link
 * OwnApiCalls} says. A request without the attribute passes through untouched, sent once.
 *
 * <pre>{@code
 * RestClient api = RestClient.builder().baseUrl(url)
 *     .requestInterceptor(new OwnApiCallsInterceptor(calls)).build();   // add it last
 * api.post().uri("/payments").attribute(OwnApiCallsInterceptor.INTENT, "order-o1/payment")
 *     .body(payment).retrieve().toBodilessEntity();
 * }</pre>
 *
 * <p>Add it last: a retry executes the rest of the chain again. A request that names an intent
 * and carries the key header already is refused with an {@link IllegalArgumentException}: the key
 * sent is the intent's.
 */
public final class OwnApiCallsInterceptor implements ClientHttpRequestInterceptor {
  /** The request attribute naming the intent ({@code RestClient}'s {@code .attribute(INTENT, "...")}). */
  public static final String INTENT = "dev.idem.intent";

  private final OwnApiCalls calls;

  /** Keys and retries as {@code calls} keeps and makes them. */
  public OwnApiCallsInterceptor(OwnApiCalls calls) {
    if (calls == null) {
      throw new IllegalArgumentException("calls must not be null");
    }
    this.calls = calls;
  }

  @Override
  public ClientHttpResponse intercept(HttpRequest request, byte[] body, ClientHttpRequestExecution execution) throws IOException {
    Object intent = request.getAttributes().get(INTENT);
    if (intent == null) {
      return execution.execute(request, body);
    }
    if (!(intent instanceof String name)) {
      throw new IllegalArgumentException("request attribute " + INTENT + " must be a String naming the intent, was a "
          + intent.getClass().getName());
    }
    String header = calls.calls().policy().header();
    if (request.getHeaders().containsKey(header)) {
      throw new IllegalArgumentException("request for intent " + name + " already carries " + header + ": remove it;"
          + " the key sent is the intent's, minted once and stored before the first send");
    }
    try {
      return calls.call(name, (h, key, attempt) -> {
        request.getHeaders().set(h, key);
        ClientHttpResponse r = execution.execute(request, body);
        return Reply.of(r, r.getStatusCode().value(), r.getHeaders().getFirst("Retry-After"));
      });
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptedIOException("interrupted while calling " + request.getURI() + " for intent " + name);
    }
  }
}
