package dev.idem.jdbc.internal.claim;

import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.key.IdempotencyKey;
import dev.idem.window.DedupeWindow;
import java.time.Duration;

/**
 * What every guard over the claim engine is configured with, checked in one place: the window, the
 * bounded wait for a copy in flight and the retry-after told when it runs out, the name events
 * carry, and the size of expiry batches. Not an API: each guard's builder sets these.
 */
public record ClaimSettings(String name, DedupeWindow window, Duration inFlightWait, Duration retryAfter,
    int expiryBatchSize, int expiryMaxBatches) {

  /** The longest wait PostgreSQL's lock_timeout (an int of milliseconds) can bound. */
  static final Duration LONGEST_LOCK_WAIT = Duration.ofMillis(Integer.MAX_VALUE);

  /** @throws IllegalArgumentException naming the setting that is missing or out of range */
  public ClaimSettings {
    IdempotencyKey.check("name", name);
    Require.notNull(window, "window");
    DbTime.bounded(window.length(), "window");
    Require.notNegative(inFlightWait, "inFlightWait");
    Require.atMost(inFlightWait, LONGEST_LOCK_WAIT, "inFlightWait", "PostgreSQL's lock_timeout holds at most 2^31 - 1 ms");
    Require.positive(retryAfter, "retryAfter");
    Require.positive(expiryBatchSize, "expiry batch size");
    Require.positive(expiryMaxBatches, "expiry max batches");
  }

  public static Builder builder(String name, DedupeWindow window) {
    return new Builder(name, window);
  }

  /** The settings as a guard's builder collects them; defaults: 2 s wait, 1 s retry-after, 100 batches of 1000. */
  public static final class Builder {
    private String name;
    private DedupeWindow window;
    private Duration inFlightWait = Duration.ofSeconds(2);
    private Duration retryAfter = Duration.ofSeconds(1);
    private int expiryBatchSize = 1000;
    private int expiryMaxBatches = 100;

    private Builder(String name, DedupeWindow window) {
      this.name = name;
      this.window = window;
    }

    public void name(String name) {
      this.name = name;
    }

    public void window(DedupeWindow window) {
      this.window = window;
    }

    public void inFlightWait(Duration wait) {
      this.inFlightWait = wait;
    }

    public void retryAfter(Duration retryAfter) {
      this.retryAfter = retryAfter;
    }

    public void expiryBatches(int batchSize, int maxBatches) {
      this.expiryBatchSize = batchSize;
      this.expiryMaxBatches = maxBatches;
    }

    public ClaimSettings build() {
      return new ClaimSettings(name, window, inFlightWait, retryAfter, expiryBatchSize, expiryMaxBatches);
    }
  }
}
