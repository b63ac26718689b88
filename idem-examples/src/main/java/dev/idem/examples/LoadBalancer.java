package dev.idem.examples;

import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * A load balancer in front of the payments service: an HTTP proxy that forwards {@code POST
 * /payments} with its {@code Idempotency-Key} header.
 *
 * <p>Fault ({@link Hop#BALANCER}): the upstream's reply is lost (a reset after the service did the
 * work). Unguarded, the balancer retries the POST, as a retry policy that covers POST does; guarded
 * ("never retry a POST") it answers 504 and leaves the decision to the app.
 */
final class LoadBalancer implements AutoCloseable {
  private final URI upstream;
  private final Tally tally;
  private final HttpClient client = Http.client();
  private final Http.Server server;

  LoadBalancer(URI upstream, Tally tally) {
    this.upstream = upstream;
    this.tally = tally;
    this.server = Http.serve("balancer", Map.of("/payments", this::forward));
  }

  URI paymentsUri() {
    return server.uri("/payments");
  }

  private void forward(HttpExchange exchange) throws IOException {
    Map<String, String> form = Http.body(exchange);
    Map<String, String> headers = new LinkedHashMap<>();
    String key = exchange.getRequestHeaders().getFirst("Idempotency-Key");
    if (key != null) {
      headers.put("Idempotency-Key", key);
    }
    try {
      Http.Reply reply = Http.post(client, upstream, headers, form);
      if (tally.fire(Hop.BALANCER, "the service's reply is lost (connection reset) after it did the work")) {
        if (tally.setup().guarded(Hop.BALANCER)) {
          tally.caught(Hop.BALANCER, "never retries a POST: answers 504 and leaves the retry to the app");
          Http.respond(exchange, 504, Map.of(), Map.of("error", "upstream reset"));
          return;
        }
        tally.note(Hop.BALANCER, "retries the POST upstream, same body and headers");
        reply = Http.post(client, upstream, headers, form);
      }
      Map<String, String> passOn = new LinkedHashMap<>();
      if (reply.header("Idempotent-Replayed") != null) {
        passOn.put("Idempotent-Replayed", reply.header("Idempotent-Replayed"));
      }
      Http.respond(exchange, reply.status(), passOn, reply.body());
    } catch (IOException e) {
      Http.respond(exchange, 502, Map.of(), Map.of("error", "upstream: " + e));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      Http.respond(exchange, 503, Map.of(), Map.of("error", "shutting down"));
    }
  }

  @Override
  public void close() {
    server.close();
  }
}
