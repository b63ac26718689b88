package dev.idem.http;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Long operations by key: a guarded handler answers {@code 202 Accepted} with the {@code Location}
 * of a status resource derived from the request's key, starts the work durably, and whatever
 * finishes the work records its final response here. Every copy of the request gets the same 202
 * (a stored response like any other); a {@code GET} of the status resource, by the same caller,
 * answers that 202 until the final response is recorded and the final response after, waiting
 * for it up to {@code Prefer: wait=N} seconds (RFC 7240), at most {@link Builder#maxWait}.
 *
 * <pre>{@code
 * LongOperations exports = LongOperations.builder(idem, "/operations/").build();
 * IdempotencyKeyFilter filter = IdempotencyKeyFilter.builder(idem).longOperations(exports).build();
 * // map the filter to the status path too: "/operations/*"
 *
 * // the handler, in the key's transaction:
 * IdempotencyKey operation = exports.accept(request, response);   // 202, Location, Retry-After
 * idem.outbox().enqueue(NewMessage.of("exports", payload(operation)));  // commits with the 202
 *
 * // the worker, in the transaction of the work's effect:
 * exports.complete(operation, 200, Map.of("Content-Type", "application/json"), body);
 * }</pre>
 *
 * <h2>Guarantees</h2>
 *
 * <ul>
 *   <li>The status resource of a key answers only the caller the key belongs to (the filter's
 *       scope): any other caller gets 404, as for an operation that does not exist.
 *   <li>The final response is recorded once per operation, in the transaction open on the calling
 *       thread, so it commits with the work's effect or not at all; a second {@link #complete}
 *       changes nothing (the first recorded response stays).
 *   <li>It is kept, and the status resource answers, while the key of the request that started
 *       the operation is remembered (the filter's window, by the database clock); after that the
 *       status resource answers 404.
 *   <li>No wait is unbounded: a {@code GET} waits at most {@link Builder#maxWait}, reading the
 *       database in short transactions with sleeps between them, holding its request thread and no
 *       pool connection while it sleeps.
 * </ul>
 *
 * <p>Does not guarantee that the work is done: the 202 is a promise only if the handler starts the
 * work durably <em>in the key's transaction</em> (an outbox message, a job row), so that the 202
 * and the work's start commit together; and a final response comes only if whatever finishes the
 * work calls {@link #complete}, also when the work fails (record the failure as the final
 * response, e.g. 422 with a problem). Without that the status resource answers 202 until the key
 * is forgotten.
 *
 * <p>Immutable and thread-safe; build one, give it to every filter of the service and to the
 * workers. Details: docs/http.md, "Long operations".
 */
public final class LongOperations {
  /** What {@link #accept} gives the request: the key, and the long operations of the filter that guards it. */
  record Guarded(IdempotencyKey key, LongOperations operations) {
    static final String ATTRIBUTE = LongOperations.class.getName() + ".guarded";
  }

  /** The step that derives the key of an operation's final response from the request's key. */
  private static final String RESULT_STEP = "operation-result";
  /** Every final response has this fingerprint: a second completion is a repeat, never a conflict. */
  private static final Fingerprint RESULT = Fingerprint.of("idem-http long operation result");
  private static final Duration LONGEST_WAIT = Duration.ofMinutes(5);

  private final Idem idem;
  private final String statusPath;
  private final Duration maxWait;
  private final Duration retryAfter;
  private final IdempotentExecutor results;

  private LongOperations(Builder b) {
    this.idem = b.idem;
    this.statusPath = b.statusPath;
    this.maxWait = b.maxWait;
    this.retryAfter = b.retryAfter;
    this.results = idem.executor().name("http-operations").window(b.window).build();
  }

  /**
   * Starts the configuration of long operations whose status resources live under {@code
   * statusPath} (e.g. {@code "/operations/"}, within the application's context path; the key
   * follows it, percent-encoded), and whose final responses live in {@code idem}'s key table.
   *
   * @throws IllegalArgumentException if {@code idem} is null, or {@code statusPath} is null, does
   *     not start and end with {@code /}, or holds a character not allowed in a URI path
   */
  public static Builder builder(Idem idem, String statusPath) {
    return new Builder(idem, statusPath);
  }

  /**
   * Answers the guarded request {@code 202 Accepted}: sets the status, the {@code Location} of the
   * operation's status resource and {@code Retry-After}; the handler may write a body. Returns the
   * operation, the request's key (the caller's scope and the client's key), to give to whatever
   * does the work, which passes it to {@link #complete}. Call it from the handler, in the key's
   * transaction, and start the work in that same transaction.
   *
   * @throws IllegalArgumentException if an argument is null
   * @throws IllegalStateException if {@code request} is not guarded by an {@link
   *     IdempotencyKeyFilter} built with these long operations (it has no key, or no status resource
   *     that would answer)
   */
  public IdempotencyKey accept(HttpServletRequest request, HttpServletResponse response) {
    if (request == null || response == null) {
      throw new IllegalArgumentException((request == null ? "request" : "response") + " must not be null");
    }
    if (!(request.getAttribute(Guarded.ATTRIBUTE) instanceof Guarded guarded) || guarded.operations() != this) {
      throw new IllegalStateException("accept: this request is not guarded by an IdempotencyKeyFilter built with"
          + " these LongOperations (IdempotencyKeyFilter.Builder.longOperations); only a request with an idempotency"
          + " key, in its handler, can be accepted as a long operation");
    }
    response.setStatus(HttpServletResponse.SC_ACCEPTED);
    response.setHeader("Location", request.getContextPath() + statusPath + encode(guarded.key().value()));
    response.setHeader("Retry-After", Long.toString(IdempotencyKeyFilter.seconds(retryAfter)));
    return guarded.key();
  }

  /**
   * Records {@code operation}'s final response: what its status resource answers from now on. It
   * joins the transaction open on this thread ({@code idem.inTransaction}, an inbox's or
   * executor's effect, a framework's through the {@code Idem}'s transaction binding), so record it
   * in the transaction of the work's effect; with none open it commits in one of its own.
   *
   * @param operation what {@link #accept} returned
   * @param status 200 to 599, not 202 (which would read as "not done")
   * @param headers sent with it, e.g. {@code Content-Type}; in the map's order
   * @param body its bytes (copied)
   * @return true if this call recorded it; false if the operation already had a final response,
   *     which stays (this one is dropped)
   * @throws IllegalArgumentException naming the argument, if one is null, the status is out of
   *     range, a header name is not an HTTP field name, a value holds a control character, or a
   *     header is one the filter writes itself ({@code Content-Length}, {@code Transfer-Encoding});
   *     nothing is written
   * @throws IllegalStateException if another completion of the same operation holds it for longer
   *     than the executor's in-flight wait (it may still roll back): nothing is written; retry
   */
  public boolean complete(IdempotencyKey operation, int status, Map<String, String> headers, byte[] body) {
    if (operation == null) {
      throw new IllegalArgumentException("operation must not be null");
    }
    if (status < 200 || status > 599 || status == HttpServletResponse.SC_ACCEPTED) {
      throw new IllegalArgumentException("status " + status + " is not a final response: give 200 to 599, not 202");
    }
    if (headers == null) {
      throw new IllegalArgumentException("headers must not be null (give Map.of() for none)");
    }
    if (body == null) {
      throw new IllegalArgumentException("body must not be null (give new byte[0] for none)");
    }
    List<StoredResponse.Header> kept = new ArrayList<>(headers.size());
    headers.forEach((name, value) -> kept.add(checkedHeader(name, value)));
    StoredResponse response = new StoredResponse(status, kept, body.clone());
    Execution<StoredResponse> recorded = results.execute(resultKey(operation), RESULT, ResponseCodec.INSTANCE, tx -> response);
    if (recorded instanceof Execution.InFlight) {
      throw new IllegalStateException("another completion of operation " + operation + " is running; nothing was"
          + " recorded by this one: retry it (it is dropped if the other commits)");
    }
    return recorded instanceof Execution.Applied;
  }

  private static StoredResponse.Header checkedHeader(String name, String value) {
    if (name == null || name.isEmpty() || !name.chars().allMatch(IdempotencyKeyFilter.Builder::tchar)) {
      throw new IllegalArgumentException("headers: \"" + name + "\" is not an HTTP field name");
    }
    String lower = name.toLowerCase(Locale.ROOT);
    if (lower.equals("content-length") || lower.equals("transfer-encoding")) {
      throw new IllegalArgumentException("headers: " + name + " is written by the filter from the body; leave it out");
    }
    if (value == null || value.chars().anyMatch(c -> (c < 0x20 && c != '\t') || c == 0x7f)) {
      throw new IllegalArgumentException("headers: the value of " + name + " must not be null nor hold a control character");
    }
    return new StoredResponse.Header(name, value);
  }

  /** The key the final response of {@code operation} is stored under: the same scope, so the same caller. */
  static IdempotencyKey resultKey(IdempotencyKey operation) {
    try {
      // a key that begins with a UUIDv7 keeps its time, which the partitioned layout files keys by
      return Keys.timedChild(operation, RESULT_STEP);
    } catch (IllegalArgumentException noUuidV7) {
      return Keys.child(operation, RESULT_STEP);
    }
  }

  /**
   * Where the status resources live, as given to the builder (e.g. {@code "/operations/"}): a
   * {@code GET} of this path and a key, within the context path, is a status resource, for a
   * framework that routes requests to the filter.
   */
  public String statusPath() {
    return statusPath;
  }

  Duration maxWait() {
    return maxWait;
  }

  Duration retryAfter() {
    return retryAfter;
  }

  Idem idem() {
    return idem;
  }

  DedupeWindow window() {
    return results.window();
  }

  /** A key value as one path segment: every byte but the URI's unreserved characters percent-encoded. */
  static String encode(String value) {
    StringBuilder out = new StringBuilder(value.length());
    for (byte b : value.getBytes(StandardCharsets.UTF_8)) {
      char c = (char) (b & 0xff);
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || "-._~".indexOf(c) >= 0) {
        out.append(c);
      } else {
        out.append('%').append(Character.toUpperCase(Character.forDigit(c >> 4, 16)))
            .append(Character.toUpperCase(Character.forDigit(c & 0xf, 16)));
      }
    }
    return out.toString();
  }

  /** The key value a path segment names, or null if it is not a percent-encoded key (then no operation is). */
  static String decode(String segment) {
    StringBuilder out = new StringBuilder(segment.length());
    for (int i = 0; i < segment.length(); i++) {
      char c = segment.charAt(i);
      if (c == '%') {
        if (i + 2 >= segment.length()) {
          return null;
        }
        int hi = Character.digit(segment.charAt(i + 1), 16);
        int lo = Character.digit(segment.charAt(i + 2), 16);
        if (hi < 0 || lo < 0) {
          return null;
        }
        c = (char) (hi << 4 | lo);
        i += 2;
      }
      if (c < '!' || c > '~') {
        return null; // a key is visible ASCII
      }
      out.append(c);
    }
    return out.isEmpty() ? null : out.toString();
  }

  /**
   * Configures {@link LongOperations}. Each setter checks its argument and throws an {@link
   * IllegalArgumentException} naming it. Not thread-safe.
   */
  public static final class Builder {
    private final Idem idem;
    private final String statusPath;
    private Duration maxWait = Duration.ofSeconds(10);
    private Duration retryAfter = Duration.ofSeconds(1);
    private DedupeWindow window = DedupeWindow.CLIENT_RETRY;

    private Builder(Idem idem, String statusPath) {
      if (idem == null) {
        throw new IllegalArgumentException("idem must not be null");
      }
      if (statusPath == null || statusPath.length() < 2 || !statusPath.startsWith("/") || !statusPath.endsWith("/")
          || statusPath.contains("//") || !statusPath.chars().allMatch(Builder::pathChar)) {
        throw new IllegalArgumentException("statusPath \"" + statusPath + "\" must be a path that starts and ends"
            + " with / (e.g. \"/operations/\"), of letters, digits and -._~!$&'()*+,;=:@/");
      }
      this.idem = idem;
      this.statusPath = statusPath;
    }

    private static boolean pathChar(int c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || "-._~!$&'()*+,;=:@/".indexOf(c) >= 0;
    }

    /**
     * The longest a {@code GET} of a status resource waits for the final response when the client
     * asks to ({@code Prefer: wait=N}); a longer wait asked is cut to this. Default 10 s; zero
     * answers at once, whatever is asked. Each waiting request holds its request thread (no pool
     * connection) for up to this long.
     *
     * @throws IllegalArgumentException if null, negative or over 5 minutes
     */
    public Builder maxWait(Duration maxWait) {
      if (maxWait == null || maxWait.isNegative() || maxWait.compareTo(LONGEST_WAIT) > 0) {
        throw new IllegalArgumentException("maxWait must be 0 to 5 minutes, was " + maxWait);
      }
      this.maxWait = maxWait;
      return this;
    }

    /**
     * The {@code Retry-After} of a 202 (the accepted answer and the status resource while the
     * operation runs), rounded up to whole seconds; default 1 s.
     *
     * @throws IllegalArgumentException if null, zero or negative
     */
    public Builder retryAfter(Duration retryAfter) {
      if (retryAfter == null || retryAfter.isNegative() || retryAfter.isZero()) {
        throw new IllegalArgumentException("retryAfter must be positive, was " + retryAfter);
      }
      this.retryAfter = retryAfter;
      return this;
    }

    /**
     * How long a final response is kept after it is recorded (by the database clock); default
     * {@link DedupeWindow#CLIENT_RETRY}, 24 h. It must be at least the window of every filter
     * these operations are given to ({@link IdempotencyKeyFilter.Builder#build} checks): the status
     * resource answers while the request's key is remembered, and must not lose its final response
     * before.
     *
     * @throws IllegalArgumentException if null
     */
    public Builder window(DedupeWindow window) {
      if (window == null) {
        throw new IllegalArgumentException("window must not be null");
      }
      this.window = window;
      return this;
    }

    /** Builds them; writes nothing. */
    public LongOperations build() {
      return new LongOperations(this);
    }
  }
}
