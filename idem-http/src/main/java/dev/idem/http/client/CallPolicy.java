package dev.idem.http.client;

import java.time.Duration;
import java.util.Arrays;
import java.util.Collection;
import java.util.Locale;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ThreadLocalRandom;

/**
 * How {@link ProviderCalls} sends one call to another company's API and when it sends it again:
 * the header that carries the call key, how many attempts in all, the back-off between them, how
 * long a {@code Retry-After} may ask it to wait, and which answers are worth another attempt.
 * Immutable; made by {@link #builder()}, whose setters refuse a bad value at once with an {@link
 * IllegalArgumentException} naming the option.
 *
 * <p>Defaults ({@link #DEFAULT}):
 *
 * <ul>
 *   <li>{@code header}: {@code Idempotency-Key} (Stripe and the IETF draft; PayPal wants {@code
 *       PayPal-Request-Id});
 *   <li>{@code maxAttempts}: 4, the first attempt included (so at most 3 retries);
 *   <li>{@code backoff}: 100 ms doubling up to 2 s, with full jitter (a uniform random wait between
 *       zero and the ceiling);
 *   <li>{@code maxRetryAfter}: 10 s: a {@code Retry-After} asking for longer stops the retries and
 *       the answer is handed back as it came;
 *   <li>{@code attemptTimeout}: 10 s, given to an {@link java.net.http.HttpRequest} that has no
 *       timeout of its own, so no attempt waits for ever;
 *   <li>{@code retryStatuses}: 408, 409, 425, 429, 500, 502, 503, 504.
 * </ul>
 *
 * <p>Why those statuses: 408 (the server gave up waiting for the request), 425 (too early) and 429
 * (slow down) say "this request, later"; 409 is what Stripe and the IETF idempotency-key draft
 * answer while an earlier request with the same key is still running (Stripe saves no result for
 * it and says it is safe to retry), so the retry with the same key gets the first request's stored
 * answer; 500, 502, 503 and 504 are the server's or a gateway's trouble, and a provider that
 * dedupes by key answers a retry of a request it did perform with its stored result. Any other
 * 4xx says the request itself is wrong (bad card, bad parameters, a key reused with other
 * parameters): repeating it cannot succeed, so the builder refuses such a status. An {@link
 * java.io.IOException} (refused or reset connection, timeout, a reply lost on the way) is always
 * retryable, because the call may or may not have been performed and only the same key makes
 * repeating it safe.
 */
public final class CallPolicy {

  /** The header most providers read the key from: Stripe's, and the IETF draft's. */
  public static final String DEFAULT_HEADER = "Idempotency-Key";

  /** The statuses retried unless {@link Builder#retryStatuses} says otherwise. */
  public static final Set<Integer> DEFAULT_RETRY_STATUSES = Set.of(408, 409, 425, 429, 500, 502, 503, 504);

  /** The 4xx statuses that may be retried; any other 4xx says the request itself is wrong. */
  public static final Set<Integer> RETRYABLE_CLIENT_ERRORS = Set.of(408, 409, 425, 429);

  /** The most attempts a policy allows: four layers of three attempts already make 81 at the bottom. */
  public static final int MAX_ATTEMPTS_LIMIT = 10;

  // Headers the JDK's HttpClient sets itself and refuses from callers.
  private static final Set<String> RESTRICTED = Set.of("connection", "content-length", "expect", "host", "upgrade");

  /** Every default; see the class comment. */
  public static final CallPolicy DEFAULT = builder().build();

  private final String header;
  private final int maxAttempts;
  private final Duration firstBackoff;
  private final Duration maxBackoff;
  private final Duration maxRetryAfter;
  private final Duration attemptTimeout;
  private final Set<Integer> retryStatuses;

  private CallPolicy(Builder b) {
    this.header = b.header;
    this.maxAttempts = b.maxAttempts;
    this.firstBackoff = b.firstBackoff;
    this.maxBackoff = b.maxBackoff;
    this.maxRetryAfter = b.maxRetryAfter;
    this.attemptTimeout = b.attemptTimeout;
    this.retryStatuses = Set.copyOf(b.retryStatuses);
  }

  /** A builder holding every default. */
  public static Builder builder() {
    return new Builder();
  }

  /** A builder holding this policy's values. */
  public Builder toBuilder() {
    Builder b = new Builder();
    b.header = header;
    b.maxAttempts = maxAttempts;
    b.firstBackoff = firstBackoff;
    b.maxBackoff = maxBackoff;
    b.maxRetryAfter = maxRetryAfter;
    b.attemptTimeout = attemptTimeout;
    b.retryStatuses = new TreeSet<>(retryStatuses);
    return b;
  }

  /** The name of the header that carries the call key. */
  public String header() {
    return header;
  }

  /** Attempts in all for one call, the first included; 1 means never retry. */
  public int maxAttempts() {
    return maxAttempts;
  }

  /** The back-off ceiling before the first retry; doubled for each retry after it. */
  public Duration firstBackoff() {
    return firstBackoff;
  }

  /** The highest back-off ceiling. */
  public Duration maxBackoff() {
    return maxBackoff;
  }

  /** The longest {@code Retry-After} honoured; one asking for longer stops the retries. */
  public Duration maxRetryAfter() {
    return maxRetryAfter;
  }

  /** The timeout given to a JDK request that has none of its own. */
  public Duration attemptTimeout() {
    return attemptTimeout;
  }

  /** The statuses retried (an unmodifiable set). */
  public Set<Integer> retryStatuses() {
    return retryStatuses;
  }

  /** Whether an answer with this status is worth another attempt with the same key. */
  public boolean retryable(int status) {
    return retryStatuses.contains(status);
  }

  /**
   * The back-off before retry {@code retry} (1 for the first retry): a uniform random wait between
   * zero and {@code min(maxBackoff, firstBackoff * 2^(retry - 1))} ("full jitter"), so callers that
   * failed together do not come back together.
   */
  public Duration backoff(int retry) {
    if (retry < 1) {
      throw new IllegalArgumentException("retry must be 1 or more, was " + retry);
    }
    long first = firstBackoff.toNanos();
    long cap = maxBackoff.toNanos();
    if (first == 0) {
      return Duration.ZERO;
    }
    int shift = retry - 1;
    long ceiling = shift >= 62 || first > (cap >> shift) ? cap : Math.min(cap, first << shift);
    return Duration.ofNanos(ThreadLocalRandom.current().nextLong(ceiling + 1));
  }

  /**
   * The longest one call can take under this policy when each attempt is bounded by {@code
   * attemptTimeout}: {@code maxAttempts * attemptTimeout + (maxAttempts - 1) * max(maxBackoff,
   * maxRetryAfter)} (70 s with the defaults). Give {@code executeExternal} a lease longer than this:
   * a copy that takes over while the holder is still retrying is safe (it sends the same key, and
   * the holder's late record is refused by its fencing token) but calls the provider again.
   */
  public Duration longestCall() {
    Duration wait = maxBackoff.compareTo(maxRetryAfter) > 0 ? maxBackoff : maxRetryAfter;
    return attemptTimeout.multipliedBy(maxAttempts).plus(wait.multipliedBy(maxAttempts - 1L));
  }

  @Override
  public String toString() {
    return "CallPolicy[header=" + header + ", maxAttempts=" + maxAttempts + ", backoff=" + firstBackoff + ".." + maxBackoff
        + ", maxRetryAfter=" + maxRetryAfter + ", attemptTimeout=" + attemptTimeout + ", retryStatuses="
        + new TreeSet<>(retryStatuses) + "]";
  }

  /** Collects the options of a {@link CallPolicy}; each setter checks its value at once. */
  public static final class Builder {
    private String header = DEFAULT_HEADER;
    private int maxAttempts = 4;
    private Duration firstBackoff = Duration.ofMillis(100);
    private Duration maxBackoff = Duration.ofSeconds(2);
    private Duration maxRetryAfter = Duration.ofSeconds(10);
    private Duration attemptTimeout = Duration.ofSeconds(10);
    private Set<Integer> retryStatuses = new TreeSet<>(DEFAULT_RETRY_STATUSES);

    private Builder() {}

    /**
     * The header that carries the call key, e.g. {@code "PayPal-Request-Id"}. Default {@value
     * #DEFAULT_HEADER}.
     *
     * @throws IllegalArgumentException if null, empty, not an HTTP token, or a header the JDK's
     *     client sets itself ({@code Host}, {@code Content-Length}, ...)
     */
    public Builder header(String name) {
      if (name == null || name.isEmpty()) {
        throw new IllegalArgumentException("header must not be null or empty");
      }
      if (name.length() > 100) {
        throw new IllegalArgumentException("header must be at most 100 characters, was " + name.length());
      }
      for (int i = 0; i < name.length(); i++) {
        char c = name.charAt(i);
        boolean token = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
            || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
        if (!token) {
          throw new IllegalArgumentException("header " + quoted(name) + " is not an HTTP field name: character "
              + quoted(String.valueOf(c)) + " at " + i + " is not allowed");
        }
      }
      if (RESTRICTED.contains(name.toLowerCase(Locale.ROOT))) {
        throw new IllegalArgumentException("header " + name + " is set by the HTTP client itself and cannot carry a key");
      }
      this.header = name;
      return this;
    }

    /**
     * Attempts in all for one call, the first included: 1 to {@value #MAX_ATTEMPTS_LIMIT}. Default
     * 4. Retry at one layer only (the one nearest the caller): attempts multiply across layers.
     */
    public Builder maxAttempts(int attempts) {
      if (attempts < 1 || attempts > MAX_ATTEMPTS_LIMIT) {
        throw new IllegalArgumentException("maxAttempts must be 1 to " + MAX_ATTEMPTS_LIMIT + ", was " + attempts
            + " (attempts multiply across layers: retry at one layer, a few times)");
      }
      this.maxAttempts = attempts;
      return this;
    }

    /**
     * The back-off between attempts: a ceiling of {@code first} before the first retry, doubled for
     * each retry up to {@code max}, with full jitter. Default 100 ms up to 2 s.
     *
     * @throws IllegalArgumentException if either is null or negative, {@code max < first}, or
     *     {@code max} is over one minute (a retry waits on the caller's thread)
     */
    public Builder backoff(Duration first, Duration max) {
      notNegative(first, "backoff first");
      notNegative(max, "backoff max");
      if (max.compareTo(first) < 0) {
        throw new IllegalArgumentException("backoff max (" + max + ") must be at least first (" + first + ")");
      }
      atMost(max, Duration.ofMinutes(1), "backoff max");
      this.firstBackoff = first;
      this.maxBackoff = max;
      return this;
    }

    /**
     * The longest {@code Retry-After} honoured, zero to 5 minutes. Default 10 s. A reply asking for
     * a longer wait is not retried: it is handed back as it came, so the caller (or its own
     * caller, or a scheduler) decides, instead of a thread waiting for minutes.
     */
    public Builder maxRetryAfter(Duration max) {
      notNegative(max, "maxRetryAfter");
      atMost(max, Duration.ofMinutes(5), "maxRetryAfter");
      this.maxRetryAfter = max;
      return this;
    }

    /**
     * The timeout given to each attempt of a JDK {@link java.net.http.HttpRequest} that has no
     * {@code timeout} of its own (a request's own timeout is kept): more than zero, at most 10
     * minutes. Default 10 s. A timed-out attempt is retried with the same key.
     */
    public Builder attemptTimeout(Duration timeout) {
      if (timeout == null || timeout.isZero() || timeout.isNegative()) {
        throw new IllegalArgumentException("attemptTimeout must be more than zero, was " + timeout);
      }
      atMost(timeout, Duration.ofMinutes(10), "attemptTimeout");
      this.attemptTimeout = timeout;
      return this;
    }

    /** The statuses retried, replacing the default set; see {@link #retryStatuses(Collection)}. */
    public Builder retryStatuses(int... statuses) {
      if (statuses == null) {
        throw new IllegalArgumentException("retryStatuses must not be null");
      }
      return retryStatuses(Arrays.stream(statuses).boxed().toList());
    }

    /**
     * The statuses retried, replacing the default set. Empty: only I/O failures are retried.
     *
     * @throws IllegalArgumentException for a status that is neither one of 408, 409, 425, 429 nor
     *     500 to 599: any other 4xx says the request itself is wrong, and repeating it cannot
     *     succeed; 1xx to 3xx are not failures
     */
    public Builder retryStatuses(Collection<Integer> statuses) {
      if (statuses == null) {
        throw new IllegalArgumentException("retryStatuses must not be null");
      }
      Set<Integer> checked = new TreeSet<>();
      for (Integer s : statuses) {
        if (s == null) {
          throw new IllegalArgumentException("retryStatuses must not hold null");
        }
        boolean serverError = s >= 500 && s <= 599;
        if (!serverError && !RETRYABLE_CLIENT_ERRORS.contains(s)) {
          throw new IllegalArgumentException("status " + s + " cannot be retried: only 408, 409, 425, 429 and 5xx can;"
              + " any other 4xx says the request itself is wrong, so repeating it cannot succeed, and 1xx to 3xx are"
              + " not failures");
        }
        checked.add(s);
      }
      this.retryStatuses = checked;
      return this;
    }

    /** The policy. */
    public CallPolicy build() {
      return new CallPolicy(this);
    }

    private static void notNegative(Duration d, String what) {
      if (d == null) {
        throw new IllegalArgumentException(what + " must not be null");
      }
      if (d.isNegative()) {
        throw new IllegalArgumentException(what + " must not be negative, was " + d);
      }
    }

    private static void atMost(Duration d, Duration limit, String what) {
      if (d.compareTo(limit) > 0) {
        throw new IllegalArgumentException(what + " must be at most " + limit + ", was " + d
            + " (every wait holds the caller's thread)");
      }
    }
  }

  static String quoted(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c >= ' ' && c <= '~') {
        b.append(c);
      } else {
        b.append(String.format("\\u%04x", (int) c));
      }
    }
    return b.append('"').toString();
  }
}
