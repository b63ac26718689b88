package dev.idem.jdbc.executor;

import dev.idem.internal.Require;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.TxCallback;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import dev.idem.window.RepeatSource;
import java.sql.Connection;
import java.time.Duration;

/**
 * Wraps an effect so that one intent key produces at most one committed effect, whatever is
 * repeated. Details in docs/executor.md. Thread-safe; build one per kind of operation and share it.
 */
public final class IdempotentExecutor {

  private final Idem idem;
  private final DedupeWindow window;
  private final Duration inFlightWait;
  private final Duration lease;
  private final Duration retryAfter;
  private final String name;
  private final int expiryBatchSize;
  private final int expiryMaxBatches;

  private IdempotentExecutor(Builder b) {
    this.idem = b.idem;
    this.window = b.window;
    this.inFlightWait = b.inFlightWait;
    this.lease = b.lease;
    this.retryAfter = b.retryAfter;
    this.name = b.name;
    this.expiryBatchSize = b.expiryBatchSize;
    this.expiryMaxBatches = b.expiryMaxBatches;
  }

  /** Starts the configuration of an executor on {@code idem}; see {@link Idem#executor()}. */
  public static Builder builder(Idem idem) {
    return new Builder(idem);
  }

  /** Local effect, in a transaction the executor owns. */
  public <T, X extends Exception> Execution<T> execute(
      IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec, TxCallback<T, X> effect) throws X {
    throw new UnsupportedOperationException("not yet");
  }

  /** Local effect, joining the caller's open transaction on {@code callerTx}. */
  public <T, X extends Exception> Execution<T> execute(
      Connection callerTx, IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec, TxCallback<T, X> effect)
      throws X {
    throw new UnsupportedOperationException("not yet");
  }

  /** External effect, in phases, without a resolver. */
  public <T, X extends Exception> Execution<T> executeExternal(
      IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec, ExternalCall<T, X> call) throws X {
    throw new UnsupportedOperationException("not yet");
  }

  /** External effect, in phases, asking {@code resolver} before a takeover calls out again. */
  public <T, X extends Exception> Execution<T> executeExternal(
      IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec, ExternalCall<T, X> call, Resolver<T, X> resolver)
      throws X {
    throw new UnsupportedOperationException("not yet");
  }

  /** Deletes keys past their window, in bounded batches. */
  public int expire() {
    throw new UnsupportedOperationException("not yet");
  }

  /** The window keys of this executor are remembered for. */
  public DedupeWindow window() {
    return window;
  }

  /**
   * Configures an {@link IdempotentExecutor}. Validates and copies in {@link #build()}; the executor
   * is immutable.
   */
  public static final class Builder {
    private final Idem idem;
    private DedupeWindow window = DedupeWindow.covering(RepeatSource.CLIENT_RETRY);
    private Duration inFlightWait = Duration.ofSeconds(2);
    private Duration lease = Duration.ofSeconds(30);
    private Duration retryAfter = Duration.ofSeconds(1);
    private String name = "executor";
    private int expiryBatchSize = 1000;
    private int expiryMaxBatches = 100;

    private Builder(Idem idem) {
      this.idem = Require.notNull(idem, "idem");
    }

    /** How long a key is remembered after its first claim; default {@link RepeatSource#CLIENT_RETRY} (24 h). */
    public Builder window(DedupeWindow window) {
      this.window = window;
      return this;
    }

    /** How long a repeat waits for a running first copy before it is answered "in flight"; 0 answers at once. */
    public Builder inFlightWait(Duration wait) {
      this.inFlightWait = wait;
      return this;
    }

    /** How long an external effect's claim is held before another copy may take it over. */
    public Builder lease(Duration lease) {
      this.lease = lease;
      return this;
    }

    /** The retry-after told to a local-effect repeat that found the first copy running. */
    public Builder retryAfter(Duration retryAfter) {
      this.retryAfter = retryAfter;
      return this;
    }

    /** The name events carry as their source; default {@code "executor"}. */
    public Builder name(String name) {
      this.name = name;
      return this;
    }

    /** How many expired keys {@link IdempotentExecutor#expire()} deletes per transaction, and at most how many batches per call. */
    public Builder expiryBatches(int batchSize, int maxBatches) {
      this.expiryBatchSize = batchSize;
      this.expiryMaxBatches = maxBatches;
      return this;
    }

    public IdempotentExecutor build() {
      Require.notNull(window, "window");
      Require.notNegative(inFlightWait, "inFlightWait");
      Require.positive(lease, "lease");
      Require.positive(retryAfter, "retryAfter");
      IdempotencyKey.check("name", name);
      Require.positive(expiryBatchSize, "expiry batch size");
      Require.positive(expiryMaxBatches, "expiry max batches");
      return new IdempotentExecutor(this);
    }
  }
}
