package dev.idem.http;

import static dev.idem.http.HttpFixture.payment;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.testing.Poll;
import java.net.URI;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Copies of a request waiting in this process for the first copy (the leader), over real HTTP and
 * a real database: what they get when the leader fails, and that they are not held by the
 * leader's own client. Every outcome is read back from the payments and key rows.
 */
class WaitingCopiesTest extends AbstractHttpTest {

  /**
   * The leader fails (a 503, not stored, or an exception) while 5 copies wait on it: its writes
   * roll back, one copy runs the handler again and commits, the other 4 get its replay. Two runs,
   * one payment, one key.
   */
  @ParameterizedTest
  @ValueSource(strings = {"block1-503", "block1-throw"})
  void whenTheLeaderFailsOneWaitingCopyRunsAndTheOthersGetItsReplay(String card) throws Exception {
    URI uri = f.serve(b -> b.inFlightWait(Duration.ofSeconds(20)));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    CountDownLatch gate = f.gate(order);
    CompletableFuture<HttpResponse<String>> leader = CompletableFuture.supplyAsync(() -> post(uri, payment(order, 1, card), key));
    assertThat(f.entered.get(order).await(10, TimeUnit.SECONDS)).isTrue();
    long parked = HttpFixture.parkedCopies();
    ExecutorService senders = Executors.newFixedThreadPool(5);
    List<CompletableFuture<HttpResponse<String>>> copies = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      copies.add(CompletableFuture.supplyAsync(() -> post(uri, payment(order, 1, card), key), senders));
    }
    senders.shutdown();
    Poll.until("5 copies wait on the leader", () -> HttpFixture.parkedCopies() - parked == 5);

    gate.countDown();
    assertThat(leader.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(card.equals("block1-503") ? 503 : 500);
    List<HttpResponse<String>> answers = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> c : copies) {
      answers.add(c.get(30, TimeUnit.SECONDS));
    }
    assertThat(answers).allSatisfy(r -> assertThat(r.statusCode()).isEqualTo(201));
    assertThat(answers).extracting(HttpResponse::body).containsOnly(answers.get(0).body());
    assertThat(answers).filteredOn(r -> r.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED).isPresent())
        .hasSize(4);
    assertThat(f.runs.get(order)).hasValue(2);
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);
  }

  /**
   * The leader's client does not read its answer: the copies waiting on the leader get the replay
   * as soon as the leader's transaction has committed, while the leader is still writing to its
   * client (before, they waited for that write and got 409 when their wait ran out).
   */
  @Test
  void copiesAreAnsweredWhenTheLeaderCommitsNotWhenItsClientHasRead() throws Exception {
    URI uri = f.serve(b -> b.inFlightWait(Duration.ofSeconds(20)));
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    CountDownLatch gate = f.gate(order);
    CountDownLatch clientReads = f.slowClient(order);
    CompletableFuture<HttpResponse<String>> leader = CompletableFuture.supplyAsync(() -> {
      try {
        return f.post(uri, payment(order, 7, "block"), "Idempotency-Key", key, "X-Slow-Client", order);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
    assertThat(f.entered.get(order).await(10, TimeUnit.SECONDS)).isTrue();
    long parked = HttpFixture.parkedCopies();
    ExecutorService senders = Executors.newFixedThreadPool(3);
    List<CompletableFuture<HttpResponse<String>>> copies = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      copies.add(CompletableFuture.supplyAsync(() -> post(uri, payment(order, 7, "block"), key), senders));
    }
    senders.shutdown();
    Poll.until("3 copies wait on the leader", () -> HttpFixture.parkedCopies() - parked == 3);

    gate.countDown();
    assertThat(f.answering.get(order).await(10, TimeUnit.SECONDS)).as("the leader writes to its client").isTrue();
    List<HttpResponse<String>> answers = new ArrayList<>();
    for (CompletableFuture<HttpResponse<String>> c : copies) {
      answers.add(c.get(15, TimeUnit.SECONDS)); // less than the 20 s wait: a 409 would come only after it
    }
    assertThat(leader).as("the leader's client has not read yet").isNotDone();
    assertThat(answers).allSatisfy(r -> {
      assertThat(r.statusCode()).isEqualTo(201);
      assertThat(r.headers().firstValue(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED)).hasValue("true");
    });
    assertThat(f.payments(order)).isEqualTo(1);
    assertThat(f.keyRows(key)).isEqualTo(1);

    clientReads.countDown();
    HttpResponse<String> first = leader.get(30, TimeUnit.SECONDS);
    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(answers).extracting(HttpResponse::body).containsOnly(first.body());
    assertThat(f.runs.get(order)).hasValue(1);
  }
}
