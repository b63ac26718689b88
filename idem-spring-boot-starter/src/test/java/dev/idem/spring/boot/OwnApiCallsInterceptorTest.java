package dev.idem.spring.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.net.httpserver.HttpServer;
import dev.idem.http.client.CallPolicy;
import dev.idem.http.client.CallRetryBudget;
import dev.idem.http.client.IntentKeys;
import dev.idem.http.client.OwnApiCalls;
import dev.idem.http.client.ProviderCalls;
import dev.idem.jdbc.Idem;
import dev.idem.spring.OwnApiCallsInterceptor;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.HttpClientErrorException;
import org.springframework.web.client.RestClient;

/**
 * Spring's RestClient with the interceptor, keys in the database, against a service on loopback
 * that answers 503 to the first request of each key, then applies the payment once per key in the
 * database (as a server guarded by the key does), and 422 to an order named "invalid".
 */
@IdemTest(sql = "CREATE TABLE own_payments (order_id varchar(100) NOT NULL, idem_key varchar(100) NOT NULL)")
class OwnApiCallsInterceptorTest {
  final TestDatabase db;
  final Idem idem;
  HttpServer service;
  RestClient client;
  final Map<String, List<String>> keysSeen = new ConcurrentHashMap<>();

  OwnApiCallsInterceptorTest(TestDatabase db, Idem idem) {
    this.db = db;
    this.idem = idem;
  }

  @BeforeEach
  void start() throws Exception {
    service = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    service.createContext("/payments/", exchange -> {
      String order = exchange.getRequestURI().getPath().substring("/payments/".length());
      String key = exchange.getRequestHeaders().getFirst("Idempotency-Key");
      exchange.getRequestBody().readAllBytes();
      List<String> seen = keysSeen.computeIfAbsent(order, o -> new CopyOnWriteArrayList<>());
      seen.add(String.valueOf(key));
      int status;
      if (order.startsWith("invalid")) {
        status = 422;
      } else if (seen.size() == 1) {
        status = 503;
        exchange.getResponseHeaders().add("Retry-After", "0");
      } else {
        db.execute("INSERT INTO own_payments (order_id, idem_key) SELECT '" + order + "', '" + key + "' FROM (SELECT 1 AS one) o"
            + " WHERE NOT EXISTS (SELECT 1 FROM own_payments WHERE idem_key = '" + key + "')");
        status = 201;
      }
      exchange.sendResponseHeaders(status, -1);
      exchange.close();
    });
    service.start();
    OwnApiCalls calls = OwnApiCalls.of(IntentKeys.database(idem), ProviderCalls.of(
        CallPolicy.builder().backoff(Duration.ofMillis(10), Duration.ofMillis(50)).build(), CallRetryBudget.standard()));
    client = RestClient.builder().baseUrl("http://127.0.0.1:" + service.getAddress().getPort())
        .requestInterceptor(new OwnApiCallsInterceptor(calls)).build();
  }

  @AfterEach
  void stop() {
    service.stop(0);
  }

  long intentRows(String intent) {
    return db.count("SELECT count(*) FROM idem_intent_keys WHERE intent = ?", intent);
  }

  @Test
  void anIntentIsSentWithItsStoredKeyRetriedWithItAndReleasedWhenDone() {
    String order = "o-" + UUID.randomUUID();
    ResponseEntity<Void> r = client.post().uri("/payments/" + order).attribute(OwnApiCallsInterceptor.INTENT, order + "/pay")
        .body("{}").retrieve().toBodilessEntity();

    assertThat(r.getStatusCode().value()).isEqualTo(201);
    List<String> keys = keysSeen.get(order);
    assertThat(keys).hasSize(2).doesNotContain("null");
    assertThat(keys.get(1)).isEqualTo(keys.get(0));
    assertThat(db.count("SELECT count(*) FROM own_payments WHERE order_id = ?", order)).isEqualTo(1);
    assertThat(intentRows(order + "/pay")).isZero();
  }

  @Test
  void a422IsNotRetriedAndReleasesTheKey() {
    String order = "invalid-" + UUID.randomUUID();
    assertThatThrownBy(() -> client.post().uri("/payments/" + order).attribute(OwnApiCallsInterceptor.INTENT, order)
        .body("{}").retrieve().toBodilessEntity()).isInstanceOf(HttpClientErrorException.UnprocessableEntity.class);

    assertThat(keysSeen.get(order)).hasSize(1);
    assertThat(intentRows(order)).isZero();
  }

  @Test
  void aRequestWithoutAnIntentIsSentOnceWithoutAKey() {
    String order = "o-" + UUID.randomUUID();
    assertThatThrownBy(() -> client.post().uri("/payments/" + order).body("{}").retrieve().toBodilessEntity())
        .hasMessageContaining("503");
    assertThat(keysSeen.get(order)).containsExactly("null");
  }

  @Test
  void anIntentWithAKeyHeaderAlreadyIsRefused() {
    String order = "o-" + UUID.randomUUID();
    assertThatThrownBy(() -> client.post().uri("/payments/" + order).attribute(OwnApiCallsInterceptor.INTENT, order)
        .header("Idempotency-Key", "mine").body("{}").retrieve().toBodilessEntity())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("already carries Idempotency-Key");
    assertThat(keysSeen).doesNotContainKey(order);
    assertThat(intentRows(order)).isZero();
  }
}
