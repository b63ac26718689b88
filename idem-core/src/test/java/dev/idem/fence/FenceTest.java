package dev.idem.fence;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.IdemException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class FenceTest {

  @Test
  void thePausedWorkerIsRefusedAfterItsSuccessorWrote() {
    // Worker A held lease 33, paused in GC past its expiry; worker B took the job with 34.
    Fence runs = new Fence("runs/nightly-invoices");
    runs.check(new FencingToken(33));
    runs.check(new FencingToken(34));
    assertThatThrownBy(() -> runs.check(new FencingToken(33)))
        .isInstanceOf(StaleFenceException.class)
        .isInstanceOf(IdemException.class)
        .hasMessage("write to runs/nightly-invoices with fencing token 33 refused: token 34 was granted since,"
            + " so this writer's lease has ended")
        .satisfies(e -> {
          StaleFenceException stale = (StaleFenceException) e;
          assertThat(stale.resource()).isEqualTo("runs/nightly-invoices");
          assertThat(stale.token()).isEqualTo(33);
          assertThat(stale.highest()).isEqualTo(34);
        });
    assertThat(runs.highest()).isEqualTo(34); // the refusal left nothing behind
  }

  @Test
  void theSameTokenMayWriteAgainAndAHigherOneRaisesTheFence() {
    Fence fence = new Fence("r");
    assertThat(fence.highest()).isZero();
    fence.check(FencingToken.FIRST);
    fence.check(FencingToken.FIRST); // the lease holder writes twice
    assertThat(fence.highest()).isEqualTo(1);
    fence.check(FencingToken.FIRST.next().next());
    assertThat(fence.highest()).isEqualTo(3);
  }

  @Test
  void tokensAreValidatedAndOrdered() {
    assertThatThrownBy(() -> new FencingToken(0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("fencing token must be 1 or more, was 0");
    assertThatThrownBy(() -> new FencingToken(Long.MAX_VALUE).next()).isInstanceOf(ArithmeticException.class);
    assertThat(new FencingToken(5)).isGreaterThan(new FencingToken(4));
    assertThat(new FencingToken(5).admits(5)).isTrue();
    assertThat(new FencingToken(5).admits(6)).isFalse();
    assertThatThrownBy(() -> new Fence("r").check(null)).hasMessage("token must not be null");
    assertThatThrownBy(() -> new Fence(" ")).hasMessage("resource must not be blank (it is only whitespace)");
  }

  @Test
  void aStoreThatCannotTellTheHighestStillRefusesClearly() {
    assertThat(new StaleFenceException("runs/1", 7, 0))
        .hasMessage("write to runs/1 with fencing token 7 refused: a higher token was granted since, so this"
            + " writer's lease has ended");
  }

  @Test
  void threadsRacingCheckKeepTheMaximumAndNoStaleWriteLandsAfterANewerOne() throws Exception {
    int threads = 8;
    int perThread = 2_000;
    Fence fence = new Fence("race");
    // Each admitted token is appended under the fence's own decision; the log of admitted tokens
    // must never go down, which is what "a lower token never writes after a higher" means.
    List<Long> admitted = new ArrayList<>();
    AtomicLong refused = new AtomicLong();
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<Long>> highestOffered = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        int offset = t;
        highestOffered.add(pool.submit(() -> {
          start.await();
          long max = 0;
          for (int i = 1; i <= perThread; i++) {
            long token = (long) i * threads + offset;
            max = Math.max(max, token);
            try {
              synchronized (admitted) {
                fence.check(new FencingToken(token));
                admitted.add(token);
              }
            } catch (StaleFenceException e) {
              refused.incrementAndGet();
            }
          }
          return max;
        }));
      }
      start.countDown();
      long maxOffered = 0;
      for (Future<Long> f : highestOffered) {
        maxOffered = Math.max(maxOffered, f.get());
      }
      assertThat(fence.highest()).isEqualTo(maxOffered);
      for (int i = 1; i < admitted.size(); i++) {
        assertThat(admitted.get(i)).isGreaterThanOrEqualTo(admitted.get(i - 1));
      }
      assertThat(admitted.size() + refused.get()).isEqualTo((long) threads * perThread);
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  void threadsRacingWithoutOutsideLocksStillEndAtTheMaximum() throws Exception {
    int threads = 8;
    Fence fence = new Fence("race");
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<?>> done = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        int offset = t;
        done.add(pool.submit(() -> {
          start.await();
          for (int i = 1; i <= 5_000; i++) {
            long token = (long) i * threads + offset;
            try {
              fence.check(new FencingToken(token));
            } catch (StaleFenceException e) {
              assertThat(e.token()).isLessThan(e.highest());
            }
          }
          return null;
        }));
      }
      start.countDown();
      for (Future<?> f : done) {
        f.get();
      }
      assertThat(fence.highest()).isEqualTo(5_000L * threads + threads - 1);
    } finally {
      pool.shutdownNow();
    }
  }
}
