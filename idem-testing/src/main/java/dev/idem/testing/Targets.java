package dev.idem.testing;

import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.function.Function;

/**
 * The {@link Target}s of the JDK alone: an HTTP endpoint on a real port, and a message handler
 * called in this JVM. Kafka is {@link KafkaTarget}, in a class of its own so that this one loads
 * without kafka-clients.
 */
public final class Targets {
  /** The timeout given to a request that has none, so no attempt waits without bound. */
  static final Duration REQUEST_TIMEOUT = Duration.ofSeconds(30);

  private Targets() {}

  /** Your message handler, as a broker calls it. */
  @FunctionalInterface
  public interface Handler {
    /**
     * Handles one copy; returning acknowledges it, an exception leaves it unacknowledged, so it
     * is delivered again.
     */
    void accept(Copy copy) throws Exception;
  }

  /**
   * Your HTTP endpoint, through a new JDK {@link HttpClient} (HTTP/1.1, 10 s to connect): {@code
   * request} builds each copy's request, e.g. with {@code copy.key()} in the {@code
   * Idempotency-Key} header and {@code copy.intent()} in the body.
   *
   * <p>As a client that retries safely: a 5xx, 409 (a copy in flight), 425 or an {@link
   * IOException} is sent again with the same key, after the response's {@code Retry-After} (in
   * seconds) when it has one; any other status is final. A request without a timeout gets 30 s.
   */
  public static Target http(Function<Copy, HttpRequest> request) {
    return http(HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(10)).build(),
        request);
  }

  /** As {@link #http(Function)}, through {@code client}. */
  public static Target http(HttpClient client, Function<Copy, HttpRequest> request) {
    Require.present(client, "client");
    Require.present(request, "request");
    return copy -> {
      HttpRequest r = request.apply(copy);
      if (r == null) {
        throw new IllegalArgumentException("the request function returned null for " + copy);
      }
      if (r.timeout().isEmpty()) {
        r = HttpRequest.newBuilder(r, (name, value) -> true).timeout(REQUEST_TIMEOUT).build();
      }
      HttpResponse<String> response;
      try {
        response = client.send(r, HttpResponse.BodyHandlers.ofString());
      } catch (IOException e) {
        return Target.Attempt.again(Require.describe(e));
      }
      int status = response.statusCode();
      String outcome = Integer.toString(status);
      if (response.headers().firstValue("Idempotent-Replayed").map("true"::equalsIgnoreCase).orElse(false)) {
        outcome += " replayed";
      } else if (status >= 300) {
        String body = response.body() == null ? "" : response.body().replaceAll("\\s+", " ").trim();
        outcome += body.isEmpty() ? "" : " " + Require.shorten(body, 60);
      }
      return Target.Attempt.ofHttp(status, response.headers().firstValue("Retry-After").orElse(null), outcome);
    };
  }

  /**
   * Your message handler (an inbox's consumer method, a listener) called in this JVM, as a broker
   * would: an exception means "not acknowledged", and the copy is delivered again.
   */
  public static Target handler(Handler handler) {
    Require.present(handler, "handler");
    return copy -> {
      try {
        handler.accept(copy);
        return Target.Attempt.done("acknowledged");
      } catch (InterruptedException e) {
        throw e;
      } catch (Exception e) {
        return Target.Attempt.again("threw " + Require.describe(e) + ", not acknowledged");
      }
    };
  }
}
