package dev.idem.http;

import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * One webhook delivery as it arrived: its request headers and the exact bytes of its body (a
 * signature covers the bytes, so the body is never parsed and re-serialized before it is checked).
 * Immutable; {@link #body()} returns a copy.
 */
public final class WebhookDelivery {
  private final Map<String, String> headers;
  private final byte[] body;

  private WebhookDelivery(Map<String, String> headers, byte[] body) {
    this.headers = headers;
    this.body = body;
  }

  /**
   * A delivery from its headers (names in any case; the first value of each is kept) and body.
   *
   * @throws IllegalArgumentException if {@code headers} or {@code body} is null
   */
  public static WebhookDelivery of(Map<String, ? extends List<String>> headers, byte[] body) {
    if (headers == null || body == null) {
      throw new IllegalArgumentException("a webhook delivery needs its headers and its body (not null)");
    }
    Map<String, String> first = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    headers.forEach((name, values) -> {
      if (name != null && values != null && !values.isEmpty() && values.get(0) != null) {
        first.putIfAbsent(name.toLowerCase(Locale.ROOT), values.get(0));
      }
    });
    return new WebhookDelivery(first, body.clone());
  }

  /** The first value of request header {@code name} (any case), or null if it was not sent. */
  public String header(String name) {
    return headers.get(name);
  }

  /** The body's bytes, as sent (a copy). */
  public byte[] body() {
    return body.clone();
  }

  /** The body without a copy, for the signatures of this package. */
  byte[] bodyBytes() {
    return body;
  }
}
