package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.net.httpserver.HttpServer;
import dev.idem.http.client.CallPolicy;
import dev.idem.http.client.CallRetryBudget;
import dev.idem.http.client.ProviderCalls;
import dev.idem.spring.ProviderCallsInterceptor;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.springframework.web.client.HttpServerErrorException;
import org.springframework.web.client.RestClient;

/**
 * Spring's RestClient with the interceptor, against a provider on loopback that answers 503 to the
 * first attempt of each key and charges once per key.
 */
class ProviderCallsInterceptorTest {
  static HttpServer provider;
  static final List<String> keysSeen = new CopyOnWriteArrayList<>();
  static final Map<String, Integer> charges = new ConcurrentHashMap<>();
  static final AtomicInteger unkeyed = new AtomicInteger();
  static RestClient client;

  @BeforeAll
  static void start() throws Exception {
    provider = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    provider.createContext("/charges", exchange -> {
      String key = exchange.getRequestHeaders().getFirst("Idempotency-Key");
      exchange.getRequestBody().readAllBytes();
      int status;
      if (key == null) {
        unkeyed.incrementAndGet();
        status = 503;
      } else {
        keysSeen.add(key);
        boolean firstAttempt = keysSeen.stream().filter(key::equals).count() == 1;
        if (firstAttempt) {
          status = 503;
          exchange.getResponseHeaders().add("Retry-After", "0");
        } else {
          charges.merge(key, 1, (a, b) -> a); // once per key, as a provider that dedupes by it
          status = 200;
        }
      }
      byte[] body = ("{\"status\":" + status + "}").getBytes(StandardCharsets.UTF_8);
      exchange.sendResponseHeaders(status, body.length);
      exchange.getResponseBody().write(body);
      exchange.close();
    });
    provider.start();
    ProviderCalls calls = ProviderCalls.of(CallPolicy.builder().backoff(Duration.ofMillis(10), Duration.ofMillis(50)).build(),
        CallRetryBudget.standard());
    client = RestClient.builder().baseUrl("http://127.0.0.1:" + provider.getAddress().getPort())
        .requestInterceptor(new ProviderCallsInterceptor(calls)).build();
  }

  @AfterAll
  static void stop() {
    provider.stop(0);
  }

  @Test
  void aKeyedRequestIsRetriedWithItsKeyAndChargedOnce() {
    String body = client.post().uri("/charges").header("Idempotency-Key", "call-1").body("{\"amount\":1}")
        .retrieve().body(String.class);
    assertThat(body).contains("200");
    assertThat(keysSeen).containsExactly("call-1", "call-1");
    assertThat(charges).containsEntry("call-1", 1).hasSize(1);
  }

  @Test
  void aRequestWithoutAKeyIsSentOnceAndNeverRetried() {
    int before = unkeyed.get();
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> client.post().uri("/charges").body("{}").retrieve().body(String.class))
        .isInstanceOf(HttpServerErrorException.class);
    assertThat(unkeyed.get()).isEqualTo(before + 1);
  }
}
