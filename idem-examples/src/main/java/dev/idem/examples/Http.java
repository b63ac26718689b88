package dev.idem.examples;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.URLDecoder;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

/**
 * The small amount of HTTP the lab needs: real servers on loopback (port 0, so runs never collide)
 * and a real client. Bodies are form-encoded ({@code a=1&b=2}) to keep the wire readable.
 */
final class Http {
  private Http() {}

  /** A reply: status, headers that matter to the lab, and the form-encoded body. */
  record Reply(int status, Map<String, String> headers, Map<String, String> body) {
    boolean ok() {
      return status >= 200 && status < 300;
    }

    String header(String name) {
      return headers.get(name.toLowerCase());
    }
  }

  /** A started server; {@link #close()} stops it and its threads. */
  static final class Server implements AutoCloseable {
    private final HttpServer server;
    private final ExecutorService pool;

    private Server(HttpServer server, ExecutorService pool) {
      this.server = server;
      this.pool = pool;
    }

    URI uri(String path) {
      return URI.create("http://127.0.0.1:" + server.getAddress().getPort() + path);
    }

    @Override
    public void close() {
      server.stop(0);
      pool.shutdownNow();
    }
  }

  /** Starts a server on 127.0.0.1 with an ephemeral port, one handler per path. */
  static Server serve(String name, Map<String, HttpHandler> handlers) {
    try {
      HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
      handlers.forEach((path, handler) -> server.createContext(path, guarded(handler)));
      AtomicInteger n = new AtomicInteger();
      ExecutorService pool = Executors.newFixedThreadPool(4, r -> {
        Thread t = new Thread(r, name + "-" + n.incrementAndGet());
        t.setDaemon(true); // never keep the JVM (or exec:java) alive
        return t;
      });
      server.setExecutor(pool);
      server.start();
      return new Server(server, pool);
    } catch (IOException e) {
      throw new IllegalStateException("could not start the " + name + " server", e);
    }
  }

  /** An unexpected failure in a handler becomes a 500, as a real server would answer. */
  private static HttpHandler guarded(HttpHandler handler) {
    return exchange -> {
      try (exchange) {
        handler.handle(exchange);
      } catch (RuntimeException | IOException e) {
        try {
          respond(exchange, 500, Map.of(), Map.of("error", String.valueOf(e)));
        } catch (IOException | RuntimeException ignored) {
          // the reply may already be on its way; the client sees a broken response either way
        }
      }
    };
  }

  static HttpClient client() {
    return HttpClient.newBuilder()
        .version(HttpClient.Version.HTTP_1_1)
        .connectTimeout(Duration.ofSeconds(5))
        .build();
  }

  static Reply post(HttpClient client, URI uri, Map<String, String> headers, Map<String, String> body)
      throws IOException, InterruptedException {
    HttpRequest.Builder request = HttpRequest.newBuilder(uri)
        .timeout(Duration.ofSeconds(30))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .POST(HttpRequest.BodyPublishers.ofString(encode(body)));
    headers.forEach(request::header);
    HttpResponse<String> response = client.send(request.build(), HttpResponse.BodyHandlers.ofString());
    Map<String, String> replyHeaders = new LinkedHashMap<>();
    response.headers().map().forEach((k, v) -> replyHeaders.put(k.toLowerCase(), String.join(",", v)));
    return new Reply(response.statusCode(), replyHeaders, decode(response.body()));
  }

  static Reply get(HttpClient client, URI uri) throws IOException, InterruptedException {
    HttpResponse<String> response = client.send(
        HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30)).GET().build(), HttpResponse.BodyHandlers.ofString());
    return new Reply(response.statusCode(), Map.of(), decode(response.body()));
  }

  static Map<String, String> body(HttpExchange exchange) throws IOException {
    try (InputStream in = exchange.getRequestBody()) {
      return decode(new String(in.readAllBytes(), StandardCharsets.UTF_8));
    }
  }

  static void respond(HttpExchange exchange, int status, Map<String, String> headers, Map<String, String> body)
      throws IOException {
    byte[] bytes = encode(body).getBytes(StandardCharsets.UTF_8);
    headers.forEach((k, v) -> exchange.getResponseHeaders().add(k, v));
    exchange.getResponseHeaders().add("Content-Type", "application/x-www-form-urlencoded");
    exchange.sendResponseHeaders(status, bytes.length == 0 ? -1 : bytes.length);
    if (bytes.length > 0) {
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(bytes);
      }
    }
  }

  static String encode(Map<String, String> form) {
    return form.entrySet().stream()
        .map(e -> URLEncoder.encode(e.getKey(), StandardCharsets.UTF_8) + "="
            + URLEncoder.encode(e.getValue(), StandardCharsets.UTF_8))
        .collect(Collectors.joining("&"));
  }

  static Map<String, String> decode(String text) {
    Map<String, String> form = new LinkedHashMap<>();
    if (text == null || text.isEmpty()) {
      return form;
    }
    for (String pair : text.split("&")) {
      int eq = pair.indexOf('=');
      String k = eq < 0 ? pair : pair.substring(0, eq);
      String v = eq < 0 ? "" : pair.substring(eq + 1);
      form.put(URLDecoder.decode(k, StandardCharsets.UTF_8), URLDecoder.decode(v, StandardCharsets.UTF_8));
    }
    return form;
  }
}
