package dev.idem.examples.boot;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A card provider on loopback, as Stripe behaves: {@code POST /charges} charges once per {@code
 * Idempotency-Key} and answers a repeat of the key from its record. Amounts over 10,000 are
 * declined (402). It can lose its next reply (charge, then drop the connection) and hold a charge
 * until released.
 */
final class CardProviderServer implements AutoCloseable {
  private static final Pattern AMOUNT = Pattern.compile("\"amount\"\\s*:\\s*(\\d+)");
  private final HttpServer server;
  /** Every request's key, in arrival order. */
  final List<String> requests = new CopyOnWriteArrayList<>();
  /** The charges made, by key. */
  final Map<String, String> charges = new ConcurrentHashMap<>();
  private final AtomicInteger ids = new AtomicInteger();
  final AtomicBoolean loseNextReply = new AtomicBoolean();
  volatile CountDownLatch hold = new CountDownLatch(0);
  volatile CountDownLatch held = new CountDownLatch(0);
  /** A charge of this amount (none when 0) waits on {@link #amountHold}: one slow charge among quick ones. */
  volatile int heldAmount;
  volatile CountDownLatch amountHold = new CountDownLatch(0);

  CardProviderServer() throws IOException {
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setExecutor(Executors.newCachedThreadPool());
    server.createContext("/charges", this::charge);
    server.start();
  }

  URI url() {
    return URI.create("http://127.0.0.1:" + server.getAddress().getPort());
  }

  private void charge(HttpExchange exchange) throws IOException {
    String key = exchange.getRequestHeaders().getFirst("Idempotency-Key");
    requests.add(String.valueOf(key));
    Matcher m = AMOUNT.matcher(new String(exchange.getRequestBody().readAllBytes(), StandardCharsets.UTF_8));
    int amount = m.find() ? Integer.parseInt(m.group(1)) : 0;
    if (key == null) {
      reply(exchange, 400, "{\"reason\":\"Idempotency-Key required\"}");
      return;
    }
    held.countDown();
    try {
      hold.await(20, TimeUnit.SECONDS);
      if (amount == heldAmount) {
        amountHold.await(60, TimeUnit.SECONDS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (amount > 10_000) {
      reply(exchange, 402, "{\"reason\":\"insufficient funds\"}");
      return;
    }
    String id = charges.computeIfAbsent(key, k -> "ch_" + ids.incrementAndGet());
    if (loseNextReply.compareAndSet(true, false)) {
      exchange.close(); // charged, and the reply is lost on the way back
      return;
    }
    reply(exchange, 200, "{\"id\":\"" + id + "\"}");
  }

  private static void reply(HttpExchange exchange, int status, String json) throws IOException {
    byte[] body = json.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().add("Content-Type", "application/json");
    exchange.sendResponseHeaders(status, body.length);
    exchange.getResponseBody().write(body);
    exchange.close();
  }

  @Override
  public void close() {
    server.stop(0);
  }
}
