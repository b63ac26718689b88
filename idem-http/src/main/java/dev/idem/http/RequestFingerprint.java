package dev.idem.http;

import com.fasterxml.jackson.core.JsonPointer;
import com.fasterxml.jackson.databind.JsonNode;
import dev.idem.key.Fingerprint;
import jakarta.servlet.http.HttpServletRequest;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * What of a request is compared when its key comes back: a repeat whose fingerprint differs from
 * the first request's is refused with 422 instead of being answered with the first response.
 *
 * <p>Every fingerprint covers the method and the route (the request URI's path and query, as
 * sent), and then the body in one of three ways:
 *
 * <ul>
 *   <li>{@link #canonicalJson()} (the default): a JSON body ({@code application/json} or any
 *       {@code +json} type) by its canonical form, so member order, whitespace and the spelling of
 *       a number ({@code 40} or {@code 40.0}) do not matter; any other body, or JSON that does not
 *       parse (or repeats a member name), by its bytes.
 *   <li>{@link #rawBody()}: the body's bytes, exactly.
 *   <li>{@link #jsonFields(String...)}: only the JSON members at the given JSON Pointers (RFC 6901),
 *       each canonical; a member that is absent differs from one that is {@code null}. A body that
 *       is not JSON is taken by its bytes.
 * </ul>
 *
 * {@link #withHeaders(String...)} adds request headers (by name, case-insensitive; all their lines,
 * in order). Fingerprint what defines the intent; leave out what varies between honest retries (a
 * timestamp, a trace id, a signature over the time).
 *
 * <p>Immutable and thread-safe.
 */
public final class RequestFingerprint {
  private enum Body { CANONICAL_JSON, RAW, JSON_FIELDS }

  private static final RequestFingerprint CANONICAL_JSON = new RequestFingerprint(Body.CANONICAL_JSON, List.of(), List.of());
  private static final RequestFingerprint RAW = new RequestFingerprint(Body.RAW, List.of(), List.of());

  private final Body body;
  private final List<JsonPointer> fields;
  private final List<String> headers;

  private RequestFingerprint(Body body, List<JsonPointer> fields, List<String> headers) {
    this.body = body;
    this.fields = fields;
    this.headers = headers;
  }

  /** Method, route, and the body as canonical JSON when it is JSON, else its bytes. The default. */
  public static RequestFingerprint canonicalJson() {
    return CANONICAL_JSON;
  }

  /** Method, route, and the body's bytes exactly. */
  public static RequestFingerprint rawBody() {
    return RAW;
  }

  /**
   * Method, route, and the JSON members at {@code pointers}, e.g. {@code "/amount"}, {@code
   * "/card/last4"}.
   *
   * @throws IllegalArgumentException if {@code pointers} is null or empty, or one is null or not a
   *     JSON Pointer (it must start with {@code /})
   */
  public static RequestFingerprint jsonFields(String... pointers) {
    if (pointers == null || pointers.length == 0) {
      throw new IllegalArgumentException("pointers must name at least one JSON member, e.g. \"/amount\"");
    }
    List<JsonPointer> compiled = new ArrayList<>();
    for (String p : pointers) {
      if (p == null || !p.startsWith("/")) {
        throw new IllegalArgumentException("pointers: " + (p == null ? "null" : "\"" + p + "\"")
            + " is not a JSON Pointer (RFC 6901); write \"/amount\" for the top-level member amount");
      }
      try {
        compiled.add(JsonPointer.compile(p));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("pointers: \"" + p + "\" is not a JSON Pointer: " + e.getMessage(), e);
      }
    }
    return new RequestFingerprint(Body.JSON_FIELDS, List.copyOf(compiled), List.of());
  }

  /**
   * This fingerprint, also covering the request headers {@code names}.
   *
   * @throws IllegalArgumentException if {@code names} is null, or a name is null or blank
   */
  public RequestFingerprint withHeaders(String... names) {
    if (names == null) {
      throw new IllegalArgumentException("names must not be null");
    }
    List<String> all = new ArrayList<>(headers);
    for (String name : names) {
      if (name == null || name.isBlank()) {
        throw new IllegalArgumentException("names: a header name must not be null or blank");
      }
      all.add(name.trim().toLowerCase(Locale.ROOT));
    }
    return new RequestFingerprint(body, fields, List.copyOf(all));
  }

  /** The fingerprint of {@code request} with its buffered {@code bytes}. */
  Fingerprint of(HttpServletRequest request, byte[] bytes) {
    Map<String, Object> parts = new LinkedHashMap<>();
    parts.put("method", request.getMethod());
    String query = request.getQueryString();
    parts.put("route", query == null ? request.getRequestURI() : request.getRequestURI() + "?" + query);
    JsonNode json = body == Body.RAW || (body == Body.CANONICAL_JSON && !isJson(request.getContentType()))
        ? null : CanonicalJson.parse(bytes);
    if (json == null) {
      // Its digest, not its bytes: the canonical text would otherwise be twice the body, in hex.
      parts.put("raw", sha256(bytes));
    } else if (body == Body.CANONICAL_JSON) {
      parts.put("json", CanonicalJson.text(json));
    } else {
      Map<String, Object> selected = new TreeMap<>();
      for (JsonPointer pointer : fields) {
        JsonNode member = json.at(pointer);
        // A list keeps absent apart from null: absent is the empty list, null the list of "null".
        selected.put(pointer.toString(), member.isMissingNode() ? List.of() : List.of(CanonicalJson.text(member)));
      }
      parts.put("fields", selected);
    }
    if (!headers.isEmpty()) {
      Map<String, List<String>> selected = new TreeMap<>();
      for (String name : headers) {
        selected.put(name, Collections.list(request.getHeaders(name)));
      }
      parts.put("headers", selected);
    }
    return Fingerprint.ofFields(parts);
  }

  /** {@code application/json}, or any {@code type/subtype+json}, with or without parameters. */
  static boolean isJson(String contentType) {
    if (contentType == null) {
      return false;
    }
    int semicolon = contentType.indexOf(';');
    String type = (semicolon < 0 ? contentType : contentType.substring(0, semicolon)).trim().toLowerCase(Locale.ROOT);
    return type.equals("application/json") || (type.indexOf('/') > 0 && type.endsWith("+json"));
  }

  private static String sha256(byte[] bytes) {
    try {
      return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM ships SHA-256", e);
    }
  }

  @Override
  public String toString() {
    return "RequestFingerprint[" + body.name().toLowerCase(Locale.ROOT)
        + (fields.isEmpty() ? "" : " " + fields) + (headers.isEmpty() ? "" : ", headers " + headers) + "]";
  }
}
