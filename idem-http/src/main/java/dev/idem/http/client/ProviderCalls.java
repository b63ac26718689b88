package dev.idem.http.client;

import dev.idem.key.IdempotencyKey;
import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Calls to another company's API (a card charge, an SMS) that carry the call key of an external
 * effect as the provider's idempotency header, and are retried only with that same key: with
 * exponential back-off and full jitter, honouring {@code Retry-After}, at most {@link
 * CallPolicy#maxAttempts()} attempts, and only while the shared {@link CallRetryBudget} allows.
 *
 * <pre>{@code
 * ProviderCalls stripe = ProviderCalls.of(CallPolicy.DEFAULT, CallRetryBudget.standard()); // one per provider
 *
 * payments.executeExternal(key, fingerprint, Codec.utf8(), attempt -> {
 *   HttpResponse<String> r = stripe.send(http, chargeRequest, attempt.callKey(), BodyHandlers.ofString());
 *   return r.body();
 * });
 * }</pre>
 *
 * <p>Guaranteed:
 *
 * <ul>
 *   <li>every attempt of a call sends the header with the same value, the call key's, and no
 *       other: this class never makes a key, and refuses a JDK request that already carries
 *       another value in the header;
 *   <li>at most {@code maxAttempts} attempts per call; an answer whose status is not retryable
 *       (any 2xx, 3xx, and a 4xx other than 408, 409, 425, 429) is handed back at once;
 *   <li>the retries of all calls sharing the budget stay within it; a call that finds the budget
 *       spent hands its failure back at once;
 *   <li>every wait is bounded: a back-off by {@code maxBackoff}, a {@code Retry-After} by {@code
 *       maxRetryAfter} (one asking for longer stops the retries), a JDK attempt by the request's
 *       timeout or {@code attemptTimeout};
 *   <li>an interrupt ends the call at once with {@link InterruptedException}, whether it came
 *       during an attempt or a wait.
 * </ul>
 *
 * <p>When the retries stop, what the last attempt got is what the call returns or throws: the
 * last response (a 503, say), or the last {@link IOException} with the earlier ones attached as
 * suppressed exceptions.
 *
 * <p>Not guaranteed:
 *
 * <ul>
 *   <li>that the effect happens once at a provider that ignores the header, or that forgot the key
 *       (Stripe keeps keys for 24 hours): each retry may then perform it again;
 *   <li>that the key identifies the intent: only pair this with {@link
 *       dev.idem.jdbc.executor.ExternalAttempt#callKey()} (or a key derived the same way), which is
 *       the same for every attempt and every takeover after a crash. A key made per attempt turns
 *       every retry into a new charge;
 *   <li>what happened when an {@link IOException} is thrown in the end: the provider may or may not
 *       have performed the call. Let it reach {@code executeExternal}, which ends the lease, so the
 *       next repeat takes over and sends the same call key again (or asks a {@code Resolver}).
 * </ul>
 *
 * <p>Give {@code executeExternal} a lease longer than {@link CallPolicy#longestCall()}, so no copy
 * takes over while this one is still retrying. Retry at this layer only: attempts multiply across
 * layers (three attempts at each of four layers make 81 at the bottom). Thread-safe: one instance
 * serves every call to one provider, and its budget is shared by all of them.
 */
public final class ProviderCalls {
  private static final Logger log = LoggerFactory.getLogger(ProviderCalls.class);

  private final CallPolicy policy;
  private final CallRetryBudget budget;
  private final Clock clock;

  private ProviderCalls(CallPolicy policy, CallRetryBudget budget, Clock clock) {
    this.policy = policy;
    this.budget = budget;
    this.clock = clock;
  }

  /**
   * Calls under {@code policy}, whose retries are taken from {@code budget} (share one budget for
   * all calls to one provider).
   *
   * @throws IllegalArgumentException if either is null
   */
  public static ProviderCalls of(CallPolicy policy, CallRetryBudget budget) {
    if (policy == null) {
      throw new IllegalArgumentException("policy must not be null");
    }
    if (budget == null) {
      throw new IllegalArgumentException("budget must not be null");
    }
    return new ProviderCalls(policy, budget, Clock.systemUTC());
  }

  /** {@link CallPolicy#DEFAULT} with a budget of its own, {@link CallRetryBudget#standard()}. */
  public static ProviderCalls withDefaults() {
    return of(CallPolicy.DEFAULT, CallRetryBudget.standard());
  }

  public CallPolicy policy() {
    return policy;
  }

  public CallRetryBudget budget() {
    return budget;
  }

  /**
   * Makes one call: attempt 1, then a retry with the same header and key for as long as the reply
   * is retryable (an {@link IOException}, or a status in {@link CallPolicy#retryStatuses()}), the
   * attempts are fewer than {@code maxAttempts}, a {@code Retry-After} asks for no more than
   * {@code maxRetryAfter}, and the budget has a retry left. Before a retry it discards the
   * response in hand ({@link CallAttempt#discard}) and waits the longer of the {@code Retry-After}
   * and the jittered back-off.
   *
   * @param callKey the key to send: {@code attempt.callKey()} of an external effect
   * @param attempt sends the request once with the header set
   * @return the response of the last attempt: a non-retryable one, or the last retryable one when
   *     the retries stopped
   * @throws IOException the last attempt's, when it got no reply (earlier ones suppressed in it)
   * @throws InterruptedException if interrupted during an attempt or a wait
   * @throws IllegalArgumentException if {@code callKey} or {@code attempt} is null
   */
  public <R> R call(IdempotencyKey callKey, CallAttempt<R> attempt) throws IOException, InterruptedException {
    if (callKey == null) {
      throw new IllegalArgumentException("callKey must not be null: send the external attempt's callKey()");
    }
    if (attempt == null) {
      throw new IllegalArgumentException("attempt must not be null");
    }
    String header = policy.header();
    String key = callKey.value();
    budget.firstAttempt();
    List<IOException> failures = new ArrayList<>();
    for (int n = 1; ; n++) {
      if (Thread.interrupted()) {
        throw interrupted(n, failures);
      }
      Reply<R> reply = null;
      IOException failure = null;
      try {
        reply = Objects.requireNonNull(attempt.send(header, key, n), "the attempt returned null instead of a Reply");
      } catch (IOException e) {
        if (Thread.currentThread().isInterrupted()) {
          failures.forEach(e::addSuppressed);
          throw e;
        }
        failure = e;
      }
      if (reply != null && !policy.retryable(reply.status())) {
        return reply.response();
      }
      Duration wait = nextWait(callKey, n, reply, failure);
      if (wait == null) {
        if (reply != null) {
          return reply.response();
        }
        failures.forEach(failure::addSuppressed);
        throw failure;
      }
      if (reply != null) {
        discard(attempt, reply.response());
      } else {
        failures.add(failure);
      }
      pause(wait, failures);
    }
  }

  /**
   * Sends {@code request} through the JDK's client with the policy's header set to {@code
   * callKey}'s value on every attempt; {@link #call} says when it is sent again. A request without
   * a timeout of its own is given {@link CallPolicy#attemptTimeout()}. Its body publisher is
   * subscribed again for each attempt, so it must be repeatable ({@code ofString}, {@code
   * ofByteArray}, {@code ofFile} are). The body of a response that is discarded for a retry is
   * closed if it is {@link AutoCloseable} (an {@code InputStream}, a {@code Stream<String>}).
   *
   * @return the last attempt's response (a non-retryable one, or the last retryable one)
   * @throws IllegalArgumentException if an argument is null, or {@code request} already carries
   *     the header with another value than the call key's (this helper sends the call key only)
   * @throws IOException the last attempt's, when it got no reply
   * @throws InterruptedException if interrupted during an attempt or a wait
   */
  public <T> HttpResponse<T> send(HttpClient client, HttpRequest request, IdempotencyKey callKey,
      HttpResponse.BodyHandler<T> handler) throws IOException, InterruptedException {
    if (client == null) {
      throw new IllegalArgumentException("client must not be null");
    }
    if (request == null) {
      throw new IllegalArgumentException("request must not be null");
    }
    if (callKey == null) {
      throw new IllegalArgumentException("callKey must not be null: send the external attempt's callKey()");
    }
    if (handler == null) {
      throw new IllegalArgumentException("handler must not be null");
    }
    String header = policy.header();
    String key = callKey.value();
    for (String present : request.headers().allValues(header)) {
      if (!present.equals(key)) {
        throw new IllegalArgumentException("the request already carries " + header + ": " + CallPolicy.quoted(present)
            + ", which is not the call key " + CallPolicy.quoted(key) + "; send only the call key (ExternalAttempt.callKey()),"
            + " the same on every attempt, and remove the header from the request");
      }
    }
    HttpRequest.Builder keyed = HttpRequest.newBuilder(request, (name, value) -> !name.equalsIgnoreCase(header))
        .header(header, key);
    if (request.timeout().isEmpty()) {
      keyed.timeout(policy.attemptTimeout());
    }
    HttpRequest toSend = keyed.build();
    return call(callKey, new CallAttempt<HttpResponse<T>>() {
      @Override
      public Reply<HttpResponse<T>> send(String h, String k, int attempt) throws IOException, InterruptedException {
        HttpResponse<T> r = client.send(toSend, handler);
        return Reply.of(r, r.statusCode(), r.headers().firstValue("Retry-After").orElse(null));
      }

      @Override
      public void discard(HttpResponse<T> response) throws Exception {
        if (response != null && response.body() instanceof AutoCloseable c) {
          c.close();
        }
      }
    });
  }

  /** The wait before the next attempt, or null when the retries stop (and why, logged). */
  private Duration nextWait(IdempotencyKey callKey, int n, Reply<?> reply, IOException failure) {
    String what = reply != null ? "status " + reply.status() : failure.toString();
    if (n >= policy.maxAttempts()) {
      log.debug("call {}: {} on attempt {} of {}; no attempt left", callKey, what, n, policy.maxAttempts());
      return null;
    }
    Optional<Duration> asked = reply == null ? Optional.empty() : RetryAfter.parse(reply.retryAfter(), clock.instant());
    if (asked.isPresent() && asked.get().compareTo(policy.maxRetryAfter()) > 0) {
      log.debug("call {}: {} with Retry-After {} (more than maxRetryAfter {}); not retried", callKey, what,
          reply.retryAfter(), policy.maxRetryAfter());
      return null;
    }
    if (!budget.tryRetry()) {
      log.debug("call {}: {} on attempt {}; the retry budget is spent, not retried ({})", callKey, what, n, budget);
      return null;
    }
    Duration backoff = policy.backoff(n);
    Duration wait = asked.isPresent() && asked.get().compareTo(backoff) > 0 ? asked.get() : backoff;
    log.debug("call {}: {} on attempt {}; retrying with the same key in {}", callKey, what, n, wait);
    return wait;
  }

  private static <R> void discard(CallAttempt<R> attempt, R response) {
    try {
      attempt.discard(response);
    } catch (Exception e) {
      log.debug("could not discard a response before retrying", e);
    }
  }

  /** Waits at least {@code wait} by the monotonic clock; an interrupt ends it at once. */
  private static void pause(Duration wait, List<IOException> failures) throws InterruptedException {
    long deadline = System.nanoTime() + wait.toNanos();
    for (long left = wait.toNanos(); left > 0; left = deadline - System.nanoTime()) {
      try {
        TimeUnit.NANOSECONDS.sleep(left);
      } catch (InterruptedException e) {
        failures.forEach(e::addSuppressed);
        throw e;
      }
    }
  }

  private static InterruptedException interrupted(int attempt, List<IOException> failures) {
    InterruptedException e = new InterruptedException("interrupted before attempt " + attempt);
    failures.forEach(e::addSuppressed);
    return e;
  }
}
