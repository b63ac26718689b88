package dev.idem.http.client;

import dev.idem.key.IdempotencyKey;
import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

/**
 * A client of a service's own API (one guarded by {@code Idempotency-Key}, such as idem's filter)
 * that keeps one key per intent: the key is minted and stored before the first send, sent on every
 * retry, in this process and in the next one after a crash, and released only when the intent is
 * done. The retries are {@link ProviderCalls}': back-off with full jitter, {@code Retry-After},
 * the shared retry budget.
 *
 * <pre>{@code
 * OwnApiCalls payments = OwnApiCalls.of(IntentKeys.database(idem), ProviderCalls.withDefaults());
 * HttpResponse<String> r = payments.send(http, "order-o1/payment", request, BodyHandlers.ofString());
 * }</pre>
 *
 * <p>Guaranteed:
 *
 * <ul>
 *   <li>the intent's key is stored ({@link IntentKeys#keyFor}) before anything is sent, and every
 *       attempt carries it in the policy's header ({@code Idempotency-Key} by default);
 *   <li>retried with that key: an {@link IOException} and the policy's statuses (408, 409, 425,
 *       429, 500, 502, 503, 504 by default), as {@link ProviderCalls#call} says; never another 4xx
 *       (422 for a key reused with another request, 400, ...);
 *   <li>the key is released only on a definitive answer: a 2xx, or a 4xx that is not retried.
 *       When the retries run out (the last answer a 503, or an {@link IOException}), or the process
 *       dies, the key stays stored, and the next send of the intent retries with it;
 *   <li>bad arguments are refused with an {@link IllegalArgumentException} naming them, before
 *       any key is minted or request sent.
 * </ul>
 *
 * <p>Not guaranteed: that the intent runs once if the server forgets the key before the retry
 * comes (idem's filter says until when it remembers it, in {@code Idempotency-Key-Expires}), or if
 * two different requests are sent under one intent (the server answers 422, and the key is
 * released). The intent must name the thing to do, not the attempt: a fresh intent per attempt is
 * a fresh key per attempt. Thread-safe.
 */
public final class OwnApiCalls {
  private final IntentKeys keys;
  private final ProviderCalls calls;

  private OwnApiCalls(IntentKeys keys, ProviderCalls calls) {
    this.keys = keys;
    this.calls = calls;
  }

  /**
   * Calls whose keys are kept in {@code keys} and retried under {@code calls}' policy and budget.
   *
   * @throws IllegalArgumentException if either is null
   */
  public static OwnApiCalls of(IntentKeys keys, ProviderCalls calls) {
    if (keys == null) {
      throw new IllegalArgumentException("keys must not be null: IntentKeys.database(idem), file(directory) or inMemory()");
    }
    if (calls == null) {
      throw new IllegalArgumentException("calls must not be null: ProviderCalls.withDefaults(), or of(policy, budget)");
    }
    return new OwnApiCalls(keys, calls);
  }

  public IntentKeys keys() {
    return keys;
  }

  public ProviderCalls calls() {
    return calls;
  }

  /**
   * Sends {@code request} for {@code intent} through the JDK's client with the intent's key, as
   * {@link ProviderCalls#send} does (its timeout and body rules apply), then releases the key if
   * the answer is definitive.
   *
   * @return the last attempt's response
   * @throws IllegalArgumentException if an argument is null, {@code intent} is not one {@link
   *     IntentKeys} accepts, or {@code request} carries the key header already (the key is the
   *     intent's, set here)
   * @throws IOException the last attempt's, when it got no reply (the key stays stored), or the
   *     store's
   * @throws InterruptedException if interrupted (the key stays stored)
   */
  public <T> HttpResponse<T> send(HttpClient client, String intent, HttpRequest request, HttpResponse.BodyHandler<T> handler)
      throws IOException, InterruptedException {
    if (client == null) {
      throw new IllegalArgumentException("client must not be null");
    }
    Intents.check(intent);
    if (request == null) {
      throw new IllegalArgumentException("request must not be null");
    }
    if (handler == null) {
      throw new IllegalArgumentException("handler must not be null");
    }
    String header = calls.policy().header();
    if (request.headers().firstValue(header).isPresent()) {
      throw new IllegalArgumentException("request already carries " + header + ": remove it; the key sent is the intent's,"
          + " minted once and stored before the first send");
    }
    IdempotencyKey key = keyOf(intent);
    HttpResponse<T> response = calls.send(client, request, key, handler);
    releaseIfDone(intent, response.statusCode());
    return response;
  }

  /**
   * Makes the call for {@code intent} with any HTTP client: {@code attempt} sends the request once
   * with the header and key it is given; retried as {@link ProviderCalls#call} says, then the key
   * is released if the last reply is definitive. A Spring {@code RestClient} takes the starter's
   * {@code OwnApiCallsInterceptor} instead.
   *
   * @throws IllegalArgumentException if {@code attempt} is null or {@code intent} is not one
   *     {@link IntentKeys} accepts
   * @throws IOException the last attempt's, when it got no reply (the key stays stored), or the
   *     store's
   * @throws InterruptedException if interrupted (the key stays stored)
   */
  public <R> R call(String intent, CallAttempt<R> attempt) throws IOException, InterruptedException {
    Intents.check(intent);
    if (attempt == null) {
      throw new IllegalArgumentException("attempt must not be null");
    }
    IdempotencyKey key = keyOf(intent);
    int[] lastStatus = {0};
    R response = calls.call(key, new CallAttempt<R>() {
      @Override
      public Reply<R> send(String header, String value, int n) throws IOException, InterruptedException {
        Reply<R> reply = attempt.send(header, value, n);
        if (reply != null) {
          lastStatus[0] = reply.status();
        }
        return reply;
      }

      @Override
      public void discard(R r) throws Exception {
        attempt.discard(r);
      }
    });
    releaseIfDone(intent, lastStatus[0]);
    return response;
  }

  private IdempotencyKey keyOf(String intent) throws IOException {
    String key = keys.keyFor(intent);
    if (key == null) {
      throw new IllegalStateException(keys + " returned no key for intent " + CallPolicy.quoted(intent));
    }
    return IdempotencyKey.of("intent", key);
  }

  /** A 2xx, or a 4xx the policy does not retry: the intent is done, and its key may go. */
  private void releaseIfDone(String intent, int status) throws IOException {
    boolean success = status >= 200 && status <= 299;
    boolean refused = status >= 400 && status <= 499 && !calls.policy().retryable(status);
    if (success || refused) {
      keys.release(intent);
    }
  }

  @Override
  public String toString() {
    return "OwnApiCalls[" + keys + ", " + calls.policy() + "]";
  }
}
