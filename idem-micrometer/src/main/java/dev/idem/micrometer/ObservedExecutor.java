package dev.idem.micrometer;

import dev.idem.jdbc.executor.ExternalCall;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.tx.TxCallback;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;

/**
 * An {@link IdempotentExecutor}'s calls inside Micrometer {@link Observation}s named {@value #NAME},
 * so traces show each guarded call and how it was answered: {@code ObservedExecutor.of(payments,
 * "payments", observationRegistry).execute(key, fingerprint, codec, effect)}.
 *
 * <p>Key values: low cardinality {@code executor} (the name given), {@code hop} ({@value #HOP}),
 * {@code kind} ({@code local} or {@code external}) and {@code outcome} ({@code applied}, {@code
 * replayed}, {@code in_flight}, {@code error}; an exception is recorded as the observation's
 * error); high cardinality {@code key.scope} and {@value #INTENT} (the whole key, {@code
 * "scope:value"}, as the {@code idem-intent} header of the messages its effect enqueues carries it:
 * a trace of one intent joins its hops by it). High cardinality values go on spans only, never on
 * a meter's tags: a metrics handler sees the low ones alone.
 *
 * <p>Guarantees: each call goes to the executor exactly once, on the calling thread, inside the
 * observation (so a tracing handler's span is current while the effect runs, and the effect's own
 * spans nest under it); what it returns or throws comes back unchanged. Does not guarantee more than
 * the executor does; see {@link IdempotentExecutor}.
 */
public final class ObservedExecutor {

  /** The observation's name. */
  public static final String NAME = "idem.execution";
  /**
   * The high cardinality key value carrying the intent key, on this observation and on {@link
   * ObservedPublisher}'s (spans only, never a meter tag).
   */
  public static final String INTENT = "idem.intent";
  /** This observation's {@code hop} key value: the guarded call at the service that received the intent. */
  public static final String HOP = "execute";

  private final IdempotentExecutor executor;
  private final String name;
  private final ObservationRegistry registry;

  private ObservedExecutor(IdempotentExecutor executor, String name, ObservationRegistry registry) {
    this.executor = executor;
    this.name = name;
    this.registry = registry;
  }

  /**
   * {@code executor}'s calls, observed on {@code registry} under {@code name}.
   *
   * @throws IllegalArgumentException if an argument is null or {@code name} is blank
   */
  public static ObservedExecutor of(IdempotentExecutor executor, String name, ObservationRegistry registry) {
    if (executor == null || registry == null || name == null || name.isBlank()) {
      throw new IllegalArgumentException("executor, a non-blank name and registry are required");
    }
    return new ObservedExecutor(executor, name, registry);
  }

  /** {@link IdempotentExecutor#execute(IdempotencyKey, Fingerprint, Codec, TxCallback)}, observed. */
  public <T, X extends Exception> Execution<T> execute(IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec,
      TxCallback<T, X> effect) throws X {
    return this.<T, X>observe("local", key, () -> executor.execute(key, fingerprint, codec, effect));
  }

  /** {@link IdempotentExecutor#executeExternal(IdempotencyKey, Fingerprint, Codec, ExternalCall)}, observed. */
  public <T, X extends Exception> Execution<T> executeExternal(IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec,
      ExternalCall<T, X> call) throws X {
    return this.<T, X>observe("external", key, () -> executor.executeExternal(key, fingerprint, codec, call));
  }

  @FunctionalInterface
  private interface Call<T, X extends Exception> {
    Execution<T> run() throws X;
  }

  private <T, X extends Exception> Execution<T> observe(String kind, IdempotencyKey key, Call<T, X> call) throws X {
    Observation observation = Observation.createNotStarted(NAME, registry)
        .contextualName(name + " " + kind)
        .lowCardinalityKeyValue("executor", name)
        .lowCardinalityKeyValue("hop", HOP)
        .lowCardinalityKeyValue("kind", kind)
        .highCardinalityKeyValue("key.scope", key == null ? "null" : key.scope())
        .highCardinalityKeyValue(INTENT, key == null ? "null" : key.toString())
        .start();
    try (Observation.Scope ignored = observation.openScope()) {
      Execution<T> outcome = call.run();
      observation.lowCardinalityKeyValue("outcome", outcome.applied() ? "applied" : outcome.replayed() ? "replayed" : "in_flight");
      return outcome;
    } catch (Throwable e) {
      observation.lowCardinalityKeyValue("outcome", "error");
      observation.error(e);
      throw e;
    } finally {
      observation.stop();
    }
  }
}
