package dev.idem.testing;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Real threads started together: how idem's tests make copies of one call race on real
 * connections. Each copy runs on a thread of its own; all wait at a gate until every thread is
 * ready, then start at once.
 */
public final class Race {
  /** How long one copy may take before the race is called stuck. */
  private static final long COPY_TIMEOUT_SECONDS = 60;

  private Race() {}

  /** One copy of the racing work; {@code i} is its number, 0 to n - 1. */
  @FunctionalInterface
  public interface Copy<T> {
    T run(int i) throws Exception;
  }

  /**
   * Runs {@code n} copies at once and returns what each returned, in the order of their numbers.
   *
   * @throws ExecutionException if a copy threw (the first one, by number)
   * @throws TimeoutException if a copy did not finish within a minute
   */
  public static <T> List<T> together(int n, Copy<T> copy) throws InterruptedException, ExecutionException, TimeoutException {
    ExecutorService threads = Executors.newFixedThreadPool(n);
    try {
      CountDownLatch ready = new CountDownLatch(n);
      CountDownLatch go = new CountDownLatch(1);
      List<Future<T>> copies = new ArrayList<>(n);
      for (int i = 0; i < n; i++) {
        int number = i;
        copies.add(threads.submit(() -> {
          ready.countDown();
          go.await();
          return copy.run(number);
        }));
      }
      ready.await();
      go.countDown();
      List<T> results = new ArrayList<>(n);
      for (Future<T> f : copies) {
        results.add(f.get(COPY_TIMEOUT_SECONDS, TimeUnit.SECONDS));
      }
      return results;
    } finally {
      threads.shutdownNow();
    }
  }
}
