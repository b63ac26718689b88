package dev.idem.http.client;

import java.io.IOException;

/**
 * One attempt of a call, made by {@link ProviderCalls#call}: send the request once, with the
 * header {@code header} set to {@code key} (replacing any value it had), and report what came
 * back. The same {@code header} and {@code key} are given to every attempt of one call. This is
 * what an adapter for an HTTP client implements; {@link ProviderCalls#send} is the one for the
 * JDK's {@link java.net.http.HttpClient}.
 *
 * <p>A Spring {@code RestClient} interceptor, for example:
 *
 * <pre>{@code
 * calls.call(callKey, (header, key, n) -> {
 *   request.getHeaders().set(header, key);
 *   ClientHttpResponse r = execution.execute(request, body);
 *   return Reply.of(r, r.getStatusCode().value(), r.getHeaders().getFirst("Retry-After"));
 * });
 * }</pre>
 *
 * @param <R> the response type
 */
@FunctionalInterface
public interface CallAttempt<R> {

  /**
   * Sends the request once with {@code header: key}.
   *
   * @param header the header name from the policy, e.g. {@code Idempotency-Key}
   * @param key the call key's value: the same for every attempt of the call
   * @param attempt 1 for the first attempt, 2 for the first retry, ...
   * @return what came back, whatever its status (a 503 is a reply, not an exception)
   * @throws IOException when no reply came (refused, reset, timed out): retried with the same key
   * @throws InterruptedException if the thread was interrupted: never retried
   */
  Reply<R> send(String header, String key, int attempt) throws IOException, InterruptedException;

  /**
   * Releases a response that will not be handed back because another attempt follows. The
   * default closes it if it is {@link AutoCloseable} (a Spring {@code ClientHttpResponse} is);
   * a failure here is logged and ignored.
   */
  default void discard(R response) throws Exception {
    if (response instanceof AutoCloseable c) {
      c.close();
    }
  }
}
