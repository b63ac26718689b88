package dev.idem.http.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.fence.StaleFenceException;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.ExternalAttempt;
import dev.idem.jdbc.executor.ExternalCall;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse.BodyHandlers;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * End to end: {@code IdempotentExecutor.executeExternal} on a real database (PostgreSQL or
 * MariaDB), whose call sends {@code attempt.callKey()} through {@link ProviderCalls} to a real HTTP
 * provider that dedupes by it. What is asserted is read back from idem's key table and counted at the provider.
 */
@IdemTest(poolSize = 6)
class ExternalCallOverHttpTest {
  static final HttpClient HTTP = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  final DataSource ds;
  final Idem idem;

  ChargeProvider provider;
  final ProviderCalls calls = ProviderCalls.of(
      CallPolicy.builder().backoff(Duration.ofMillis(1), Duration.ofMillis(5)).build(), CallRetryBudget.standard());

  ExternalCallOverHttpTest(DataSource ds, Idem idem) {
    this.ds = ds;
    this.idem = idem;
  }

  @BeforeEach
  void start() throws IOException {
    provider = new ChargeProvider();
  }

  @AfterEach
  void stop() {
    provider.close();
  }

  static IdempotencyKey newKey() {
    return IdempotencyKey.of("shop-42", UUID.randomUUID().toString());
  }

  HttpRequest chargeRequest() {
    return HttpRequest.newBuilder(provider.uri()).POST(HttpRequest.BodyPublishers.ofString("amount=4000")).build();
  }

  /** The user's call: the charge through the provider, its id as the stored result. */
  ExternalCall<String, Exception> charge(List<ExternalAttempt> attempts) {
    return a -> {
      attempts.add(a);
      return calls.send(HTTP, chargeRequest(), a.callKey(), BodyHandlers.ofString()).body();
    };
  }

  /** The key's row: state, fence, call_key, result as text (read as bytes and decoded here, on either database). */
  Map<String, String> row(IdempotencyKey key) throws SQLException {
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT state, fence, call_key, result FROM idem_keys WHERE scope = ? AND idem_keys.key = ?")) {
      ps.setString(1, key.scope());
      ps.setString(2, key.value());
      try (ResultSet rs = ps.executeQuery()) {
        assertThat(rs.next()).as("the key has a row").isTrue();
        byte[] result = rs.getBytes(4);
        return Map.of("state", rs.getString(1), "fence", String.valueOf(rs.getObject(2)), "call_key", rs.getString(3),
            "result", result == null ? "null" : new String(result, java.nio.charset.StandardCharsets.UTF_8));
      }
    }
  }

  @Test
  void theCallSendsTheCallKeyAndIsRetriedWithItAndTheRowHoldsTheOneCharge() throws Exception {
    IdempotentExecutor payments = idem.executor().build();
    IdempotencyKey key = newKey();
    String callKey = Keys.child(key, "external").value();
    provider.then(ChargeProvider.status(503, null));
    List<ExternalAttempt> attempts = new CopyOnWriteArrayList<>();

    Execution<String> first = payments.executeExternal(key, Fingerprint.of("4000 USD"), Codec.utf8(), charge(attempts));
    Execution<String> repeat = payments.executeExternal(key, Fingerprint.of("4000 USD"), Codec.utf8(), charge(attempts));

    assertThat(first.applied()).isTrue();
    assertThat(repeat.replayed()).isTrue();
    assertThat(repeat.value()).isEqualTo(first.value()).isEqualTo(provider.charges.get(callKey));
    assertThat(attempts).singleElement().satisfies(a -> assertThat(a.callKey().value()).isEqualTo(callKey));
    assertThat(provider.received).hasSize(2).allSatisfy(q -> assertThat(q.key()).isEqualTo(callKey));
    assertThat(provider.charges).containsOnlyKeys(callKey);
    assertThat(row(key)).containsEntry("state", "C").containsEntry("fence", "1")
        .containsEntry("call_key", callKey).containsEntry("result", first.value());
  }

  /**
   * The holder charges, then stalls past its lease (a crash, a long GC pause). A repeat finds the
   * lease ended by the database clock, takes over with token 2 and sends the same call key: the
   * provider answers with the charge it made, and charges once. The stalled holder's record is
   * refused.
   */
  @Test
  void aTakeoverAfterTheHolderStalledPastItsLeaseSendsTheSameCallKeyAndTheProviderChargesOnce() throws Exception {
    IdempotentExecutor holder = idem.executor().lease(Duration.ofSeconds(1)).inFlightWait(Duration.ZERO).build();
    IdempotentExecutor repeat = idem.executor().lease(Duration.ofSeconds(1)).inFlightWait(Duration.ofSeconds(15)).build();
    IdempotencyKey key = newKey();
    String callKey = Keys.child(key, "external").value();
    CountDownLatch charged = new CountDownLatch(1);
    CountDownLatch wake = new CountDownLatch(1);
    List<ExternalAttempt> attempts = new CopyOnWriteArrayList<>();

    CompletableFuture<Throwable> stalled = CompletableFuture.supplyAsync(() -> {
      try {
        holder.executeExternal(key, Fingerprint.of("4000 USD"), Codec.utf8(), a -> {
          attempts.add(a);
          String body = calls.send(HTTP, chargeRequest(), a.callKey(), BodyHandlers.ofString()).body();
          charged.countDown();
          wake.await(30, TimeUnit.SECONDS);
          return body;
        });
        return null;
      } catch (Throwable t) {
        return t;
      }
    });
    assertThat(charged.await(10, TimeUnit.SECONDS)).isTrue();
    assertThat(row(key)).containsEntry("state", "I").containsEntry("call_key", callKey);

    Execution<String> takenOver = repeat.executeExternal(key, Fingerprint.of("4000 USD"), Codec.utf8(), charge(attempts));
    wake.countDown();

    assertThat(takenOver.applied()).isTrue();
    assertThat(takenOver.value()).isEqualTo(provider.charges.get(callKey));
    assertThat(attempts).hasSize(2).allSatisfy(a -> assertThat(a.callKey().value()).isEqualTo(callKey));
    assertThat(attempts.get(1).takeover()).isTrue();
    assertThat(stalled.get(10, TimeUnit.SECONDS)).isInstanceOf(StaleFenceException.class);
    assertThat(provider.received).hasSize(2).allSatisfy(q -> assertThat(q.key()).isEqualTo(callKey));
    assertThat(provider.charges).containsOnlyKeys(callKey);
    assertThat(row(key)).containsEntry("state", "C").containsEntry("fence", "2")
        .containsEntry("call_key", callKey).containsEntry("result", takenOver.value());
  }

  /**
   * The provider charges but every reply is lost: the retries stop at maxAttempts and the failure
   * reaches executeExternal, which ends the lease. The next repeat takes over at once and sends the
   * same call key: the provider's stored answer, one charge.
   */
  @Test
  void aReplyLostOnEveryAttemptEndsTheLeaseAndTheNextRepeatGetsTheProvidersAnswer() throws Exception {
    IdempotentExecutor payments = idem.executor().inFlightWait(Duration.ZERO).build();
    IdempotencyKey key = newKey();
    String callKey = Keys.child(key, "external").value();
    int attemptsPerCall = calls.policy().maxAttempts();
    for (int i = 0; i < attemptsPerCall; i++) {
      provider.then(ChargeProvider.CHARGE_THEN_DROP);
    }
    List<ExternalAttempt> attempts = new CopyOnWriteArrayList<>();

    assertThatThrownBy(() -> payments.executeExternal(key, Fingerprint.of("4000 USD"), Codec.utf8(), charge(attempts)))
        .isInstanceOf(IOException.class);
    assertThat(row(key)).containsEntry("state", "I");
    Execution<String> next = payments.executeExternal(key, Fingerprint.of("4000 USD"), Codec.utf8(), charge(attempts));

    assertThat(next.applied()).isTrue();
    assertThat(next.value()).isEqualTo(provider.charges.get(callKey));
    assertThat(attempts).hasSize(2).allSatisfy(a -> assertThat(a.callKey().value()).isEqualTo(callKey));
    assertThat(provider.received).hasSize(attemptsPerCall + 1).allSatisfy(q -> assertThat(q.key()).isEqualTo(callKey));
    assertThat(provider.charges).containsOnlyKeys(callKey);
    assertThat(row(key)).containsEntry("state", "C").containsEntry("fence", "2").containsEntry("result", next.value());
  }
}
