package dev.idem.http;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A servlet filter that makes a route safe to repeat by the client's {@code Idempotency-Key}
 * (draft-ietf-httpapi-idempotency-key-header-07): the handler runs once per key, its writes and
 * its response commit together with the key, and every repeat gets that first response back.
 *
 * <pre>{@code
 * IdempotencyKeyFilter filter = IdempotencyKeyFilter.builder(idem).build();
 * context.addFilter("idempotency", filter).addMappingForUrlPatterns(null, false, "/payments/*");
 * // in the servlet: idem.useTransaction(tx -> insertPayment(tx, ...)); it joins the key's transaction
 * }</pre>
 *
 * <h2>Guarantees, for each key (its value within its {@linkplain Builder#scope scope})</h2>
 *
 * <ul>
 *   <li>The handler's writes made through idem's transaction ({@code idem.inTransaction}, or the
 *       framework's, see {@link RequestTransaction}) and the stored response commit in one
 *       transaction with the key, or none of them does. Nothing reaches the client before that
 *       commit.
 *   <li>A repeat with the same request (see {@link RequestFingerprint}) gets the first response:
 *       its status, its {@linkplain Builder#replayedHeaders stored headers} and body, plus {@code
 *       Idempotent-Replayed: true}. The handler does not run.
 *   <li>A repeat with another request gets 422; a repeat while the first still runs, past {@link
 *       Builder#inFlightWait}, gets 409 with {@code Retry-After}.
 *   <li>In this process, a repeat that arrives while the first copy runs waits in memory for it,
 *       holding its request thread and <em>no</em> pool connection (it takes none before the
 *       first has an answer). It is told as soon as the first copy's transaction ends, before the
 *       first copy's own client is answered, and gets the replay (or runs, if the first rolled
 *       back), or 409 when the wait ends first; a repeat with
 *       another request gets 422 at once, counted as a fingerprint mismatch by the {@code Idem}'s
 *       listener, as the executor counts one. In another process, the first copy of the key there
 *       finds the running copy's key row locked and is answered at once, so it gives its connection
 *       back and waits in memory too (the copies behind it wait on it), asking the database again
 *       after pauses of 2 to 50 ms until {@link Builder#inFlightWait} ends: it holds a connection
 *       only for those claims, never for a lock wait. It gets the replay once the running copy
 *       commits (or 422 for another request: its claim is invisible until it commits), or 409.
 *   <li>A key never crosses callers: its scope is the caller ({@link Builder#scope}, by default
 *       the authenticated principal). A guarded request whose caller is not known is refused (403,
 *       or 400 naming a missing {@link Builder#scopeHeader}) before anything is claimed or run;
 *       there is no shared space unless {@link Builder#sharedScope()} is set. The 403 tells the
 *       client only that the request names no caller; the first one a filter refuses logs a WARN
 *       for the service's operators saying whether no principal was found or the resolver
 *       returned none, and which settings to check.
 *   <li>A response whose status the {@link StorePolicy} does not store, and an exception from the
 *       handler, roll everything back: the key is free and a retry runs the handler again. The
 *       response is still sent (the exception reaches the container as it was thrown).
 *   <li>A missing key (when {@linkplain Builder#keyRequired required}) or a malformed one is a 400,
 *       a body over {@link Builder#maxBodySize} a 413, before anything is claimed or run. Every
 *       answer of the filter's own is an RFC 9457 {@code application/problem+json} body.
 * </ul>
 *
 * <p>Does not guarantee: anything the handler does outside the transaction (an email, a call to
 * another company: use idem's outbox or an external effect); that writes the handler makes on
 * another connection (a pool of its own, auto-commit) roll back with the key; recognising a repeat
 * after the {@link Builder#window}. The handler may run more than once for one key when attempts
 * roll back: after an exception, a status not stored, or a serialization failure that idem's
 * executor runs again within its {@code RetryBudget} (a servlet container then starts the rest of
 * the chain again; filters after this one are not re-run by Tomcat, so map this filter last).
 *
 * <p>With {@link Builder#longOperations}, a guarded handler may answer {@code 202 Accepted} for
 * work that finishes later ({@link LongOperations#accept}), and the filter answers the {@code GET}s
 * of their status resources, for the key's caller only; see {@link LongOperations}.
 *
 * <p>Only requests of {@link DispatcherType#REQUEST} dispatches that the {@link Builder#guarded}
 * predicate selects are guarded; everything else passes through untouched. A guarded handler may
 * not go asynchronous ({@code startAsync} throws {@link IllegalStateException}) nor read multipart
 * parts: its response must be complete when the transaction commits.
 *
 * <p>Immutable and thread-safe; one instance serves every request. Details: docs/http.md.
 */
public final class IdempotencyKeyFilter implements Filter {
  /** The header's name in the draft: {@value}. */
  public static final String IDEMPOTENCY_KEY = "Idempotency-Key";
  /** Added to every replayed response: {@value}{@code : true}. */
  public static final String IDEMPOTENT_REPLAYED = "Idempotent-Replayed";
  /**
   * Added to every response whose key is stored (the first answer and every replay): {@value},
   * an HTTP-date until which the key is remembered at least. It is the key row's expiry, written
   * from the database clock, rounded down to the second.
   */
  public static final String IDEMPOTENCY_KEY_EXPIRES = "Idempotency-Key-Expires";
  /**
   * The default {@link Builder#problemTypeBase}: {@value}. Each problem's {@code type} is this
   * base and the problem's name ({@code https://idem.dev/problems/idempotency-key-missing}), listed
   * in docs/http.md; identifiers, stable across versions, not necessarily pages that resolve.
   */
  public static final String DEFAULT_PROBLEM_TYPE_BASE = "https://idem.dev/problems/";

  private static final Logger LOG = LoggerFactory.getLogger(IdempotencyKeyFilter.class);
  /** Headers every stored response keeps: the body means nothing without them. */
  private static final List<String> ALWAYS_REPLAYED = List.of("Content-Type", "Content-Encoding", "Location");
  /** The one scope of {@link Builder#sharedScope()}. */
  private static final String SHARED = "shared";
  /** The prefix of a scope replaced by its hash (see {@link #keyPart}). */
  private static final String HASHED = "sha256:";
  /**
   * The pauses between a leader's claims of a key another instance runs: doubled from the first
   * to the last, so a short run elsewhere is seen soon and a long one costs a claim every 50 ms.
   */
  private static final Duration FIRST_PAUSE = Duration.ofMillis(2);
  private static final Duration LAST_PAUSE = Duration.ofMillis(50);

  private final IdempotentExecutor executor;
  /** Where the key rows live, to read a claimed row's expiry ({@link KeyExpiry}). */
  private final Idem idem;
  private final String headerName;
  private final boolean bareKeys;
  private final boolean keyRequired;
  private final Predicate<HttpServletRequest> guarded;
  private final ScopeResolver scope;
  /** The header {@link #scope} reads, to name it when it is missing; null for any other scope. */
  private final String scopeHeader;
  private final RequestFingerprint fingerprint;
  private final int maxBodySize;
  private final StorePolicy storePolicy;
  private final List<String> replayedHeaders;
  private final RequestTransaction transaction;
  private final URI problemTypeBase;
  private final Duration inFlightWait;
  private final Duration retryAfter;
  private final FilterEvents events;
  /** The long operations whose 202s this filter stores and whose status resources it answers; null when off. */
  private final LongOperations operations;
  private final InFlightRequests running = new InFlightRequests();
  /** Set by the first request refused for naming no caller: the advice is logged once, not per request. */
  private final AtomicBoolean noCallerLogged = new AtomicBoolean();

  private IdempotencyKeyFilter(Builder b, IdempotentExecutor executor) {
    this.executor = executor;
    this.idem = b.idem;
    this.headerName = b.headerName;
    this.bareKeys = b.bareKeys;
    this.keyRequired = b.keyRequired;
    this.guarded = b.guarded;
    this.scope = b.scope;
    this.scopeHeader = b.scopeHeader;
    this.fingerprint = b.fingerprint;
    this.maxBodySize = b.maxBodySize;
    this.storePolicy = b.storePolicy;
    this.replayedHeaders = b.replayedHeaders;
    this.transaction = b.transaction;
    this.problemTypeBase = b.problemTypeBase;
    this.inFlightWait = b.inFlightWait;
    this.retryAfter = b.retryAfter;
    this.events = new FilterEvents(b.idem.listener(), b.name);
    this.operations = b.operations;
  }

  /**
   * Starts the configuration of a filter whose keys live in {@code idem}'s key table.
   *
   * @throws IllegalArgumentException if {@code idem} is null
   */
  public static Builder builder(Idem idem) {
    return new Builder(idem);
  }

  /** How often a request header was sent, and its first value (null when it was not sent). */
  private record Sent(int count, String first) {}

  /** Reads the values of {@code name} once: missing (0, null), one value, or n values. */
  private static Sent sent(HttpServletRequest request, String name) {
    Enumeration<String> values = request.getHeaders(name);
    if (!values.hasMoreElements()) {
      return new Sent(0, null);
    }
    String first = values.nextElement();
    int count = 1;
    for (; values.hasMoreElements(); values.nextElement()) {
      count++;
    }
    return new Sent(count, first);
  }

  /**
   * Deletes keys past their window, in batches (see {@code IdempotentExecutor.expire()}); call it
   * from a scheduler. Returns how many were deleted.
   */
  public long expire() {
    return executor.expire();
  }

  @Override
  public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain) throws IOException, ServletException {
    if (!(req instanceof HttpServletRequest request) || !(res instanceof HttpServletResponse response)
        || request.getDispatcherType() != DispatcherType.REQUEST) {
      chain.doFilter(req, res);
      return;
    }
    String operation = operations != null && "GET".equals(request.getMethod()) ? OperationStatus.keyValueOf(request, operations) : null;
    if (operation != null) {
      String caller = caller(request, response);
      if (caller != null) {
        OperationStatus.answer(request, response, operations, keyPart(caller), operation, problemTypeBase);
      }
      return;
    }
    if (!guarded.test(request)) {
      chain.doFilter(req, res);
      return;
    }
    Sent keys = sent(request, headerName);
    if (keys.count() == 0) {
      if (keyRequired) {
        Problem.missingKey(headerName).send(response, problemTypeBase);
      } else {
        chain.doFilter(req, res);
      }
      return;
    }
    String value;
    try {
      if (keys.count() > 1) {
        throw new KeyHeader.Malformed(headerName + " was sent " + keys.count() + " times; send exactly one key");
      }
      value = KeyHeader.parse(headerName, keys.first(), bareKeys);
    } catch (KeyHeader.Malformed e) {
      Problem.malformedKey(e.getMessage()).send(response, problemTypeBase);
      return;
    }
    String caller = caller(request, response);
    if (caller == null) {
      return;
    }
    byte[] body = BufferedRequest.read(request, maxBodySize);
    if (body == null) {
      Problem.tooLarge(maxBodySize).send(response, problemTypeBase);
      return;
    }
    IdempotencyKey key = IdempotencyKey.of(keyPart(caller), value);
    Fingerprint print = fingerprint.of(request, body);
    InFlightRequests.Entry copy = running.entry(key, print);
    switch (running.admit(copy, inFlightWait)) {
      case LEAD -> lead(request, response, chain, key, print, body, copy);
      case ASK_THE_STORE -> guard(request, response, chain, key, print, body, null).answer().sendTo(response);
      case REUSED -> {
        events.fingerprintMismatch(key);
        Problem.keyReused(headerName).send(response, problemTypeBase);
      }
      case IN_FLIGHT -> {
        events.inFlight(key, retryAfter);
        inFlight(response, retryAfter);
      }
    }
  }

  /**
   * The caller {@code request} comes from, or null after answering it with the problem that says
   * why it names none.
   */
  private String caller(HttpServletRequest request, HttpServletResponse response) throws IOException {
    String caller;
    if (scopeHeader != null) {
      Sent named = sent(request, scopeHeader);
      if (named.count() > 1) {
        // Which of two callers it is cannot be told; taking the first would let a caller pick its scope.
        Problem.repeatedScopeHeader(scopeHeader, named.count()).send(response, problemTypeBase);
        return null;
      }
      // What the scopeHeader resolver would read, without reading the header again.
      caller = named.first() == null ? null : named.first().trim();
    } else {
      caller = scope.scopeOf(request);
    }
    if (caller == null || caller.isBlank()) {
      // A blank scope is no caller: hashed, every such caller would share one key space.
      if (scopeHeader != null) {
        Problem.missingScopeHeader(scopeHeader).send(response, problemTypeBase);
      } else {
        logNoCaller(request);
        Problem.noCaller().send(response, problemTypeBase);
      }
      return null;
    }
    return caller;
  }

  /**
   * The first copy of its key in this process: it goes to the database, tells the copies waiting
   * on it what it left there as soon as the transaction has ended, and only then answers its own
   * client (a slow or gone client must not hold the copies, nor make one of them run again).
   */
  private void lead(HttpServletRequest request, HttpServletResponse response, FilterChain chain, IdempotencyKey key,
      Fingerprint print, byte[] body, InFlightRequests.Entry copy) throws IOException, ServletException {
    Outcome outcome = null;
    Pauses pauses = new Pauses(inFlightWait, FIRST_PAUSE, LAST_PAUSE);
    try {
      outcome = guard(request, response, chain, key, print, body, copy);
      // Another instance runs the key (its claim is uncommitted): the executor answered at once,
      // and the connection is back in the pool. Wait here, holding nothing but this thread (the
      // copies behind this one wait on it in memory), and ask again until the wait is over: a
      // claim that waited on the row lock would hold a connection for the whole wait.
      while (outcome.left() == InFlightRequests.Left.HELD_ELSEWHERE && pauses.next()) {
        outcome = guard(request, response, chain, key, print, body, copy);
      }
    } finally {
      copy.left(outcome == null ? InFlightRequests.Left.NOTHING : outcome.left());
    }
    outcome.answer().sendTo(response);
  }

  /** What a run left in the database, and the answer its client is to get (not sent yet). */
  private record Outcome(InFlightRequests.Left left, Answer answer) {}

  /** An answer decided after the transaction ended, written to the client afterwards. */
  @FunctionalInterface
  private interface Answer {
    void sendTo(HttpServletResponse response) throws IOException;
  }

  /**
   * Runs the request through the executor, in the request transaction, and decides its answer
   * without sending it. {@code copy} is the leader's entry (told when its claim succeeds), or null
   * for a copy that waited for a leader that committed: the store answers it at once. Throws what
   * the handler or the transaction threw, after the rollback.
   */
  private Outcome guard(HttpServletRequest request, HttpServletResponse response, FilterChain chain,
      IdempotencyKey key, Fingerprint print, byte[] body, InFlightRequests.Entry copy) throws IOException, ServletException {
    CapturedResponse[] last = new CapturedResponse[1];
    try {
      Execution<StoredResponse> outcome = transaction.run(() -> executor.execute(key, print, ResponseCodec.INSTANCE, tx -> {
        if (copy != null) {
          copy.holds();
        }
        // A fresh request and response on every run: a run the executor repeats reads the whole
        // body again and leaves nothing of the failed run in the answer.
        CapturedResponse captured = new CapturedResponse(response);
        last[0] = captured;
        if (operations != null) {
          request.setAttribute(LongOperations.Guarded.ATTRIBUTE, new LongOperations.Guarded(key, operations));
        }
        chain.doFilter(new BufferedRequest(request, body), captured);
        if (!storePolicy.stores(captured.getStatus())) {
          throw new NotStored(captured);
        }
        // Read before the store: the header goes to this client only, a replay computes its own.
        Instant expires = KeyExpiry.read(tx, idem.schema(), key);
        if (expires != null) {
          captured.setHeader(IDEMPOTENCY_KEY_EXPIRES, KeyExpiry.header(expires));
        }
        return captured.stored(replayedHeaders);
      }));
      if (outcome instanceof Execution.Applied) {
        return new Outcome(InFlightRequests.Left.COMMITTED, last[0]::sendTo);
      } else if (outcome instanceof Execution.Replayed<StoredResponse> replayed) {
        // A local key row is completed when it is created, and expires a window after: the same
        // database time the row's expires_at was written from, without reading the row again.
        Instant expires = replayed.firstCompletedAt().plus(executor.window().length());
        return new Outcome(InFlightRequests.Left.COMMITTED, to -> replay(replayed.value(), expires, to));
      }
      Duration after = ((Execution.InFlight<StoredResponse>) outcome).retryAfter();
      return new Outcome(InFlightRequests.Left.HELD_ELSEWHERE, to -> inFlight(to, after));
    } catch (NotStored notStored) {
      LOG.debug("key {}: status {} is not stored; the handler's transaction was rolled back and the key is free",
          key, notStored.response.getStatus());
      return new Outcome(InFlightRequests.Left.NOTHING, notStored.response::sendTo);
    } catch (KeyReuseException reused) {
      return new Outcome(InFlightRequests.Left.COMMITTED, to -> Problem.keyReused(headerName).send(to, problemTypeBase));
    } catch (IOException | ServletException | RuntimeException e) {
      throw e;
    } catch (Exception e) {
      // Only a RequestTransaction that breaks its contract (wraps what the work threw) gets here.
      throw new ServletException("the request transaction failed: " + e, e);
    }
  }

  private void inFlight(HttpServletResponse response, Duration retryAfter) throws IOException {
    response.setHeader("Retry-After", Long.toString(seconds(retryAfter)));
    Problem.inFlight(headerName).send(response, problemTypeBase);
  }

  private static void replay(StoredResponse stored, Instant expires, HttpServletResponse response) throws IOException {
    stored.writeTo(response, IDEMPOTENT_REPLAYED, "true", IDEMPOTENCY_KEY_EXPIRES, KeyExpiry.header(expires));
  }

  /** Retry-After is whole seconds (RFC 9110); never 0, which would invite an immediate retry. */
  static long seconds(Duration retryAfter) {
    return Math.max(1, (retryAfter.toMillis() + 999) / 1000);
  }

  /**
   * Tells the service's operators, once per filter, why a request was refused for naming no caller
   * and what may be wrong in the setup: the client's problem never names the server's settings.
   */
  private void logNoCaller(HttpServletRequest request) {
    if (!noCallerLogged.compareAndSet(false, true)) {
      return;
    }
    String why = scope == ScopeResolver.PRINCIPAL
        ? "no principal was found (getUserPrincipal() is null), and keys are scoped by the authenticated principal"
        : "the ScopeResolver returned no caller (null or blank)";
    LOG.warn("{} {} with an {} was refused with 403 because {}. If that request was authenticated, the filter that"
        + " authenticates it (or sets what the ScopeResolver reads) runs after this one: order it first (with Spring"
        + " Boot: an order below idem.http.filter-order, or raise idem.http.filter-order). If callers are named"
        + " otherwise, scope keys by a request header (idem.http.scope-header, IdempotencyKeyFilter.Builder.scopeHeader)"
        + " or by a ScopeResolver. Logged once; later such requests are refused the same way.",
        request.getMethod(), request.getRequestURI(), headerName, why);
  }

  /**
   * The caller's scope as a key part, one per caller: a valid key part is kept as it is; one that is
   * not (a principal name with spaces or accents) is replaced by {@code sha256:} and its SHA-256. A
   * scope that itself starts with {@code sha256:} is hashed too, so no caller's own scope can spell
   * another caller's hashed one.
   */
  private static String keyPart(String s) {
    if (!s.startsWith(HASHED)) {
      try {
        return IdempotencyKey.check("scope", s);
      } catch (IllegalArgumentException notAKeyPart) {
        // hashed below
      }
    }
    try {
      return HASHED + HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM ships SHA-256", e);
    }
  }

  /** Thrown from the effect to roll it back on purpose; carries the response to send anyway. */
  private static final class NotStored extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final transient CapturedResponse response;

    NotStored(CapturedResponse response) {
      super("status " + response.getStatus() + " is not stored", null, false, false);
      this.response = response;
    }
  }

  /**
   * Configures an {@link IdempotencyKeyFilter}. Each setter checks its argument and throws an
   * {@link IllegalArgumentException} naming it; {@link #build()} checks the executor's settings and
   * builds an immutable filter. The builder itself is not thread-safe.
   */
  public static final class Builder {
    private static final Predicate<HttpServletRequest> POST_AND_PATCH =
        r -> "POST".equals(r.getMethod()) || "PATCH".equals(r.getMethod());

    /** The longest in-flight wait, as idem's executors allow (PostgreSQL's lock_timeout holds at most 2^31 - 1 ms). */
    private static final Duration LONGEST_IN_FLIGHT_WAIT = Duration.ofMillis(Integer.MAX_VALUE);

    private final Idem idem;
    private String name = "http";
    private DedupeWindow window = DedupeWindow.CLIENT_RETRY;
    private Duration inFlightWait = Duration.ofMillis(250);
    private Duration retryAfter = Duration.ofSeconds(1);
    private String headerName = IDEMPOTENCY_KEY;
    private boolean bareKeys = true;
    private boolean keyRequired = true;
    private Predicate<HttpServletRequest> guarded = POST_AND_PATCH;
    private ScopeResolver scope = ScopeResolver.PRINCIPAL;
    private String scopeHeader;
    private RequestFingerprint fingerprint = RequestFingerprint.canonicalJson();
    private int maxBodySize = 1024 * 1024;
    private StorePolicy storePolicy = StorePolicy.DEFAULT;
    private List<String> replayedHeaders = ALWAYS_REPLAYED;
    private RequestTransaction transaction = RequestTransaction.DIRECT;
    private URI problemTypeBase = URI.create(DEFAULT_PROBLEM_TYPE_BASE);
    private LongOperations operations;

    private Builder(Idem idem) {
      this.idem = notNull(idem, "idem");
    }

    /** The executor's name, carried by idem's events; default {@code "http"}. */
    public Builder name(String name) {
      this.name = notNull(name, "name");
      return this;
    }

    /**
     * How long a key is remembered, by the database clock; default {@link
     * DedupeWindow#CLIENT_RETRY} (24 hours, as Stripe). A repeat after it runs again.
     */
    public Builder window(DedupeWindow window) {
      this.window = notNull(window, "window");
      return this;
    }

    /**
     * How long a repeat waits for the first copy still running before it is answered 409; default
     * 250 ms. If the first finishes within it, the repeat gets the replay (or runs, if the first
     * rolled back). Every repeat waits in memory, holding its request thread and no pool
     * connection: in the same process as the first, on the first; in another, the first copy of
     * the key there asks the database again every few milliseconds (2 to 50) for this long, each
     * time a claim that does not wait on the running copy's row lock.
     *
     * @throws IllegalArgumentException if {@code wait} is null, negative or longer than 2^31 - 1 ms
     */
    public Builder inFlightWait(Duration wait) {
      notNull(wait, "inFlightWait");
      if (wait.isNegative() || wait.compareTo(LONGEST_IN_FLIGHT_WAIT) > 0) {
        throw new IllegalArgumentException("inFlightWait must be 0 to " + LONGEST_IN_FLIGHT_WAIT + ", was " + wait);
      }
      this.inFlightWait = wait;
      return this;
    }

    /** The {@code Retry-After} of a 409, rounded up to whole seconds; default 1 s. */
    public Builder retryAfter(Duration retryAfter) {
      this.retryAfter = notNull(retryAfter, "retryAfter");
      return this;
    }

    /** The request header that carries the key; default {@value IdempotencyKeyFilter#IDEMPOTENCY_KEY}. */
    public Builder headerName(String headerName) {
      this.headerName = checkFieldName(headerName, "headerName");
      return this;
    }

    private static String checkFieldName(String name, String argument) {
      notNull(name, argument);
      if (name.isEmpty() || !name.chars().allMatch(Builder::tchar)) {
        throw new IllegalArgumentException(argument + " \"" + name + "\" is not an HTTP field name (RFC 9110"
            + " token: letters, digits and !#$%&'*+-.^_`|~)");
      }
      return name;
    }

    /**
     * Whether a key sent unquoted ({@code Idempotency-Key: 8e03...}, as most clients do) is taken
     * as it is; default true. False accepts only the draft's Structured Field string ({@code
     * "8e03..."}) and answers anything else 400.
     */
    public Builder acceptBareKeys(boolean accept) {
      this.bareKeys = accept;
      return this;
    }

    /**
     * Whether a guarded request without the header is refused with 400; default true. False lets
     * it through unguarded: the handler runs, with no key and nothing stored.
     */
    public Builder keyRequired(boolean required) {
      this.keyRequired = required;
      return this;
    }

    /**
     * Which requests are guarded; default POST and PATCH (the draft's non-idempotent methods).
     * Others pass through untouched.
     */
    public Builder guarded(Predicate<HttpServletRequest> guarded) {
      this.guarded = notNull(guarded, "guarded");
      return this;
    }

    /**
     * Whose key it is: the same key value under two scopes is two keys, and a caller never gets
     * another caller's response. Default {@link ScopeResolver#PRINCIPAL}: the authenticated
     * principal's name; a guarded request with no principal is refused with 403 (there is no
     * shared "anonymous" space). Use the tenant or API account when callers are not servlet
     * principals. Replaces a {@link #scopeHeader} or {@link #sharedScope} set before.
     */
    public Builder scope(ScopeResolver scope) {
      this.scope = notNull(scope, "scope");
      this.scopeHeader = null;
      return this;
    }

    /**
     * Scopes keys by a request header that names the caller (e.g. {@code X-Tenant-Id}, an API
     * account set by the gateway): a guarded request without it, with it blank or with it sent
     * more than once, is refused with 400 naming the header. Only safe when the header is set by something the caller cannot forge (a gateway,
     * an authentication filter). Replaces a {@link #scope} set before.
     *
     * @throws IllegalArgumentException if {@code name} is null or not an HTTP field name
     */
    public Builder scopeHeader(String name) {
      checkFieldName(name, "scopeHeader");
      this.scope = r -> {
        String caller = r.getHeader(name);
        return caller == null || caller.isBlank() ? null : caller.trim();
      };
      this.scopeHeader = name;
      return this;
    }

    /**
     * <b>Dangerous:</b> puts every caller's keys in one space. A caller who sends a key another
     * caller used gets that caller's stored response (its ids, amounts, headers), or a 422 that
     * tells it the key was used. Only for a service with a single caller, or keys that are
     * unguessable and never leave the one client that made them. Replaces a {@link #scope} set
     * before.
     */
    public Builder sharedScope() {
      this.scope = r -> SHARED;
      this.scopeHeader = null;
      return this;
    }

    /** What is compared when a key comes back; default {@link RequestFingerprint#canonicalJson()}. */
    public Builder fingerprint(RequestFingerprint fingerprint) {
      this.fingerprint = notNull(fingerprint, "fingerprint");
      return this;
    }

    /**
     * The largest request body a guarded request may have, in bytes; default 1 MiB. The body is
     * held in memory to fingerprint and replay it; a larger one is answered 413 and nothing is
     * claimed or run.
     */
    public Builder maxBodySize(int bytes) {
      this.maxBodySize = checkedMaxBodySize(bytes);
      return this;
    }

    /** {@code bytes} if a body of that size can be held in one array, else the error naming maxBodySize. */
    static int checkedMaxBodySize(int bytes) {
      if (bytes < 0 || bytes > Integer.MAX_VALUE - 8) {
        throw new IllegalArgumentException("maxBodySize must be 0 to " + (Integer.MAX_VALUE - 8) + " bytes, was " + bytes);
      }
      return bytes;
    }

    /** Which statuses are stored and replayed; default {@link StorePolicy#DEFAULT}. */
    public Builder storePolicy(StorePolicy policy) {
      this.storePolicy = notNull(policy, "storePolicy");
      return this;
    }

    /**
     * Response headers stored and replayed besides Content-Type, Content-Encoding and Location
     * (always kept); default none. The first response carries every header the handler set;
     * repeats only these. Do not name headers that must not be repeated (Set-Cookie, a Date).
     *
     * @throws IllegalArgumentException if {@code names} is null or a name is null or blank
     */
    public Builder replayedHeaders(String... names) {
      notNull(names, "replayedHeaders");
      List<String> all = new ArrayList<>(ALWAYS_REPLAYED);
      for (String n : names) {
        if (n == null || n.isBlank()) {
          throw new IllegalArgumentException("replayedHeaders: a header name must not be null or blank");
        }
        if (all.stream().noneMatch(n::equalsIgnoreCase)) {
          all.add(n);
        }
      }
      this.replayedHeaders = List.copyOf(all);
      return this;
    }

    /**
     * The transaction each guarded request runs in; default {@link RequestTransaction#DIRECT}
     * (idem's executor owns it). The Spring starter sets Spring's here.
     */
    public Builder transaction(RequestTransaction transaction) {
      this.transaction = notNull(transaction, "transaction");
      return this;
    }

    /**
     * Where the filter's problem types live: each problem's {@code type} is this URI resolved
     * against its name ({@code idempotency-key-missing}, {@code idempotency-key-malformed}, {@code
     * idempotency-key-reused}, {@code idempotency-key-in-flight}, {@code idempotency-scope-missing},
     * {@code idempotency-scope-repeated}, {@code idempotency-scope-unknown}, {@code
     * request-too-large}), e.g. {@code https://api.example.com/problems/} (end it with a slash).
     * Default {@value IdempotencyKeyFilter#DEFAULT_PROBLEM_TYPE_BASE}; {@code about:blank} makes
     * every type {@code about:blank}, told apart by status and detail.
     */
    public Builder problemTypeBase(URI base) {
      this.problemTypeBase = notNull(base, "problemTypeBase");
      return this;
    }

    /**
     * Lets guarded handlers answer {@code 202 Accepted} for work that finishes later ({@link
     * LongOperations#accept}), and makes this filter answer the {@code GET}s of their status
     * resources (map it to the status path too). Its 202s are stored and replayed as any response,
     * with their {@code Retry-After}. Default none: off, and a GET passes through.
     *
     * @throws IllegalArgumentException if {@code operations} is null
     */
    public Builder longOperations(LongOperations operations) {
      this.operations = notNull(operations, "longOperations");
      return this;
    }

    /**
     * Builds the filter and its executor; writes nothing (the executor asks a connection's metadata
     * once which database it is on, to render its statements for it).
     *
     * @throws IllegalArgumentException naming the setting, if the executor refuses it (a name that
     *     is not a valid key part, a retryAfter not positive), or
     *     if the {@link #longOperations} keep final responses for less than this filter's window, in
     *     another schema, or the {@link #storePolicy} does not store 202
     */
    public IdempotencyKeyFilter build() {
      if (operations != null && !storePolicy.stores(202)) {
        // an accepted 202 not stored would roll back with the work's start, and promise a result that never comes
        throw new IllegalArgumentException("longOperations: the storePolicy does not store 202, the answer of an accepted"
            + " long operation; store it (StorePolicy.DEFAULT does)");
      }
      if (operations != null && !operations.idem().schema().equals(idem.schema())) {
        throw new IllegalArgumentException("longOperations: they keep final responses in schema " + operations.idem().schema()
            + ", and this filter its keys in " + idem.schema() + ": build both on the same Idem");
      }
      if (operations != null && operations.window().length().compareTo(window.length()) < 0) {
        throw new IllegalArgumentException("longOperations: their window (" + operations.window().length() + ") is"
            + " shorter than this filter's window (" + window.length() + "): a status resource would answer 202 after"
            + " its final response was forgotten; give LongOperations.Builder.window at least the filter's");
      }
      if (operations != null && replayedHeaders.stream().noneMatch("Retry-After"::equalsIgnoreCase)) {
        // every copy of an accepted request is told when to ask its status resource, as the first
        List<String> all = new ArrayList<>(replayedHeaders);
        all.add("Retry-After");
        replayedHeaders = List.copyOf(all);
      }
      // Built to answer "in flight" at once: the filter does the waiting, outside any connection (see lead).
      IdempotentExecutor executor = idem.executor()
          .name(name)
          .window(window)
          .inFlightWait(Duration.ZERO)
          .retryAfter(retryAfter)
          .build();
      return new IdempotencyKeyFilter(this, executor);
    }

    static boolean tchar(int c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
    }

    private static <T> T notNull(T value, String argument) {
      if (value == null) {
        throw new IllegalArgumentException(argument + " must not be null");
      }
      return value;
    }
  }
}
