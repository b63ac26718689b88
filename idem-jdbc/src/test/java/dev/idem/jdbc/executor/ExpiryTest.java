package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.event.IdemEvent;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import java.io.IOException;
import java.time.Duration;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Keys are remembered for their window, by the database clock, and then forgotten in batches. */
class ExpiryTest {
  static ExecutorFixture f;

  @BeforeAll
  static void start() {
    f = new ExecutorFixture("executor_expiry", 4);
  }

  @AfterAll
  static void stop() {
    f.close();
  }

  @Test
  void aRepeatAfterTheWindowRunsAgainAndReclaimsTheRowWithAHigherFence() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(700))).build();
    IdempotencyKey key = IdempotencyKey.of("expiry", UUID.randomUUID().toString());
    Execution<String> first = shortMemory.execute(key, Fingerprint.of("a"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
    Execution<String> within = shortMemory.execute(key, Fingerprint.of("a"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 1));
    assertThat(within.replayed()).isTrue();
    f.sql("SELECT pg_sleep(0.8)"); // the database's clock moves past the window
    // Past the window the key is free, even for another request, and even before expire() ran.
    Execution<String> after = shortMemory.execute(key, Fingerprint.of("b"), Codec.utf8(), tx -> ExecutorFixture.pay(tx, key.value(), 2));
    assertThat(after.applied()).isTrue();
    assertThat(after.value()).isNotEqualTo(first.value());
    assertThat(f.payments(key.value())).isEqualTo(2);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, "fence")).isEqualTo("2");
    assertThat(f.column(key, "convert_from(result, 'UTF8')")).isEqualTo(after.value());
  }

  @Test
  void anExternalClaimPastItsWindowIsReclaimedForTheNewIntent() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(500)))
        .lease(Duration.ofMillis(200)).build();
    IdempotencyKey key = IdempotencyKey.of("expiry", UUID.randomUUID().toString());
    Execution<String> first = shortMemory.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> "" + a.token().value());
    f.sql("SELECT pg_sleep(0.6)");
    Execution<String> again = shortMemory.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), a -> "" + a.token().value());
    assertThat(again.applied()).isTrue();
    // the new intent's token is above the last one (and above the fence floor other tests raised)
    assertThat(Long.parseLong(again.value())).isGreaterThan(Long.parseLong(first.value()));
    assertThat(f.column(key, "fence")).isEqualTo(again.value());
  }

  @Test
  void aStalledExternalHolderCannotRecordOverTheNextIntentAfterExpiry() throws Exception {
    IdempotentExecutor shortMemory = f.idem.executor().window(DedupeWindow.of(Duration.ofMillis(500)))
        .lease(Duration.ofMillis(300)).build();
    IdempotencyKey key = IdempotencyKey.of("expiry", UUID.randomUUID().toString());
    java.util.concurrent.CountDownLatch stalled = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch wake = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CompletableFuture<Execution<String>> a = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
      try {
        return shortMemory.executeExternal(key, Fingerprint.of("intent A"), Codec.utf8(), attempt -> {
          stalled.countDown();
          wake.await(); // a pause past the lease and the window
          return "A's result";
        });
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      }
    });
    stalled.await();
    f.sql("SELECT pg_sleep(0.6)"); // past the lease and the window, by the database clock
    shortMemory.expire();
    Execution<String> c = shortMemory.executeExternal(key, Fingerprint.of("intent C"), Codec.utf8(), attempt -> "C's result");
    wake.countDown();

    assertThat(c.value()).isEqualTo("C's result");
    assertThat(a).failsWithin(Duration.ofSeconds(10))
        .withThrowableOfType(java.util.concurrent.ExecutionException.class)
        .withCauseInstanceOf(dev.idem.fence.StaleFenceException.class);
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.column(key, "convert_from(result, 'UTF8')")).isEqualTo("C's result");
    assertThat(Long.parseLong(f.column(key, "fence"))).isGreaterThan(1);
  }

  @Test
  void expireInsideATransactionStillCommitsEachBatchOnItsOwn() throws Exception {
    String scope = "own-" + UUID.randomUUID().toString().substring(0, 8);
    IdempotentExecutor executor = f.idem.executor().expiryBatches(3, 10).build();
    for (int i = 0; i < 7; i++) {
      executor.execute(IdempotencyKey.of(scope, "k-" + i), Fingerprint.EMPTY, Codec.none(), tx -> null);
    }
    f.sql("UPDATE idem.idem_keys SET expires_at = clock_timestamp() - interval '1 second' WHERE scope = '" + scope + "'");
    org.assertj.core.api.Assertions.assertThatThrownBy(() -> f.idem.useTransaction(tx -> {
      assertThat(executor.expire()).isGreaterThanOrEqualTo(7);
      throw new IllegalStateException("the caller's transaction rolls back");
    })).hasMessageContaining("rolls back");
    assertThat(f.count("SELECT count(*) FROM idem.idem_keys WHERE scope = '" + scope + "'")).isZero();
  }

  @Test
  void expireSkipsARowTheCallersOwnTransactionHoldsInsteadOfWaitingForIt() throws Exception {
    String scope = "held-" + UUID.randomUUID().toString().substring(0, 8);
    IdempotentExecutor executor = f.idem.executor().build();
    for (int i = 0; i < 3; i++) {
      executor.execute(IdempotencyKey.of(scope, "k-" + i), Fingerprint.EMPTY, Codec.none(), tx -> null);
    }
    f.sql("UPDATE idem.idem_keys SET expires_at = clock_timestamp() - interval '1 second' WHERE scope = '" + scope + "'");
    java.util.concurrent.CompletableFuture<Void> caller = java.util.concurrent.CompletableFuture.runAsync(() ->
        f.idem.useTransaction(tx -> {
          // the caller holds one expired row (as a re-claim of it would), then expires keys
          tx.dsl().execute("SELECT 1 FROM idem.idem_keys WHERE scope = ? AND key = 'k-0' FOR UPDATE", scope);
          executor.expire();
        }));
    try {
      caller.get(10, java.util.concurrent.TimeUnit.SECONDS);
    } catch (java.util.concurrent.TimeoutException waitingOnItself) {
      f.sql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
      throw new AssertionError("expire() waited on a row its caller's own transaction holds");
    }
    assertThat(f.count("SELECT count(*) FROM idem.idem_keys WHERE scope = '" + scope + "' AND key = 'k-0'")).isEqualTo(1);
    assertThat(f.count("SELECT count(*) FROM idem.idem_keys WHERE scope = '" + scope + "'")).isEqualTo(1);
  }

  @Test
  void expireDeletesOnlyKeysPastTheirWindowInBoundedBatches() throws Exception {
    String scope = "batch-" + UUID.randomUUID().toString().substring(0, 8);
    IdempotentExecutor executor = f.idem.executor().window(DedupeWindow.of(Duration.ofHours(1))).expiryBatches(10, 2).build();
    for (int i = 0; i < 25; i++) {
      executor.execute(IdempotencyKey.of(scope, "old-" + i), Fingerprint.EMPTY, Codec.none(), tx -> null);
    }
    for (int i = 0; i < 5; i++) {
      executor.execute(IdempotencyKey.of(scope, "young-" + i), Fingerprint.EMPTY, Codec.none(), tx -> null);
    }
    // An external claim in flight past its window but inside its lease is kept.
    IdempotencyKey holding = IdempotencyKey.of(scope, "holding");
    IdempotentExecutor longLease = f.idem.executor().lease(Duration.ofHours(1)).build();
    try {
      longLease.executeExternal(holding, Fingerprint.EMPTY, Codec.utf8(), a -> {
        throw new IOException("stays in flight");
      });
    } catch (IOException expected) {
      // ending the lease is what the policy does; give it a live one again below
    }
    f.sql("UPDATE idem.idem_keys SET lease_expires_at = clock_timestamp() + interval '1 hour' WHERE key = 'holding' AND scope = '" + scope + "'");
    while (executor.expire() > 0) {
      // first forget what other tests of this class left past its window
    }
    // Time passes for the old ones (the test moves their window's end instead of sleeping an hour).
    f.sql("UPDATE idem.idem_keys SET expires_at = clock_timestamp() - interval '1 second'"
        + " WHERE scope = '" + scope + "' AND (key LIKE 'old-%' OR key = 'holding')");
    f.events.clear();

    assertThat(executor.expire()).as("two batches of ten at most").isEqualTo(20);
    assertThat(executor.expire()).isEqualTo(5);
    assertThat(executor.expire()).isZero();
    assertThat(f.count("SELECT count(*) FROM idem.idem_keys WHERE scope = '" + scope + "' AND key LIKE 'old-%'")).isZero();
    assertThat(f.count("SELECT count(*) FROM idem.idem_keys WHERE scope = '" + scope + "' AND key LIKE 'young-%'")).isEqualTo(5);
    assertThat(f.keyRows(holding)).isEqualTo(1);
    assertThat(f.events.of(IdemEvent.Expired.class)).extracting(IdemEvent.Expired::count).containsExactly(20L, 5L);
  }
}
