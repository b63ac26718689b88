package dev.idem.http.client;

/**
 * What one attempt got back, as {@link ProviderCalls} needs to see it: the response itself (handed
 * back to the caller, or discarded if another attempt follows), its status, and its {@code
 * Retry-After} field, if any.
 *
 * @param response the response as the HTTP client made it (a JDK {@code HttpResponse}, a Spring
 *     {@code ClientHttpResponse}, ...); may be null if the attempt has nothing to hand back
 * @param status the HTTP status, 100 to 999
 * @param retryAfter the {@code Retry-After} field value as received, or null; delta-seconds and
 *     HTTP-dates are understood, anything else is ignored
 * @param <R> the response type
 */
public record Reply<R>(R response, int status, String retryAfter) {
  /** @throws IllegalArgumentException if {@code status} is not 100 to 999 */
  public Reply {
    if (status < 100 || status > 999) {
      throw new IllegalArgumentException("status must be 100 to 999, was " + status);
    }
  }

  /** Same as the constructor; reads better in an attempt. */
  public static <R> Reply<R> of(R response, int status, String retryAfter) {
    return new Reply<>(response, status, retryAfter);
  }
}
