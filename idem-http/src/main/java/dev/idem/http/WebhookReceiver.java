package dev.idem.http;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.tx.Tx;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Receives a sender's webhooks once per event: checks the signature, takes the event id, claims it
 * in an idem {@link Inbox} and runs the handler in the same transaction, and answers.
 *
 * <pre>{@code
 * WebhookReceiver stripe = WebhookReceiver.builder(idem, "stripe", WebhookSignature.stripe(secret)).build();
 * // in a servlet (or a Spring controller taking the request and response):
 * stripe.receive(request, response, (tx, delivery) -> applyEvent(tx, delivery.body()));
 * }</pre>
 *
 * <h2>Guarantees</h2>
 *
 * <ul>
 *   <li>A delivery whose signature does not pass is refused before anything else: 400 when a
 *       signature header is missing or unreadable, 401 when no signature matches. Nothing is
 *       read from or written to the database.
 *   <li>A delivery signed longer ago than the {@link Builder#tolerance} (or that far in the
 *       future), comparing the sender's timestamp with the <em>database</em> clock, is refused with
 *       401 and nothing written. The timestamp is the sender's clock: skew between the two counts
 *       against the tolerance.
 *   <li>For each event id, the handler's writes commit at most once within the {@link
 *       Builder#window} (3 days by default, Stripe's and Svix's retry span): the claim of the id
 *       and the handler's writes (through {@code tx}, or {@code idem.inTransaction}, which joins)
 *       commit together or not at all. A handler that throws rolls both back, and the exception
 *       reaches the caller (the servlet container answers 500): the sender delivers again.
 *   <li>A recognised repeat is answered 200 with {@code Idempotent-Replayed: true} at once; the
 *       handler does not run. A copy that arrives while the first runs waits up to the inbox's
 *       in-flight wait, then gets 409 with {@code Retry-After}: the sender retries it.
 * </ul>
 *
 * <p>Does not guarantee: anything the handler does outside the transaction (use idem's outbox);
 * order between events (handle each as a state transition); a repeat after the window.
 *
 * <p>Immutable and thread-safe. Details: docs/http.md, "Webhooks received".
 */
public final class WebhookReceiver {
  private final Idem idem;
  private final Inbox inbox;
  private final WebhookSignature signature;
  private final Function<WebhookDelivery, String> eventId;
  private final Duration tolerance;
  private final URI problemTypeBase;
  private final int maxBodySize;

  private WebhookReceiver(Builder b) {
    this.idem = b.idem;
    this.inbox = b.idem.inbox(b.consumer).window(b.window).build();
    this.signature = b.signature;
    this.eventId = b.eventId != null ? b.eventId : b.signature::eventId;
    this.tolerance = b.tolerance;
    this.problemTypeBase = b.problemTypeBase;
    this.maxBodySize = b.maxBodySize;
  }

  /**
   * Starts a receiver whose event ids are claimed in the inbox of {@code consumer} (one per sender
   * and endpoint: the same event id under two consumers is two events).
   *
   * @throws IllegalArgumentException if an argument is null, or {@code consumer} is not a valid key part
   */
  public static Builder builder(Idem idem, String consumer, WebhookSignature signature) {
    return new Builder(idem, consumer, signature);
  }

  /** What the handler does with one event, in the transaction that claims its id. */
  @FunctionalInterface
  public interface Handler {
    /**
     * Applies the event. Write through {@code tx} (or {@code idem.inTransaction}, which joins it).
     * Throwing rolls back the claim with the writes; the sender delivers the event again.
     */
    void handle(Tx tx, WebhookDelivery delivery) throws Exception;
  }

  /**
   * The answer to a delivery, for a server that is not a servlet container: send the status, the
   * headers and the body (empty for a 200).
   *
   * @param status 200 (applied now, or a recognised repeat), 400, 401, 409 or 413
   * @param headers {@code Content-Type} of a problem, {@code Idempotent-Replayed}, {@code Retry-After}
   * @param body an {@code application/problem+json} body, or empty
   */
  public record Answer(int status, Map<String, String> headers, String body) {
    public Answer {
      headers = Collections.unmodifiableMap(new LinkedHashMap<>(headers));
    }
  }

  /**
   * Receives one delivery: verifies, claims, runs {@code handler} once per event id, and returns
   * the answer to send.
   *
   * @throws Exception what {@code handler} threw, after rolling everything back: answer 5xx
   */
  public Answer receive(WebhookDelivery delivery, Handler handler) throws Exception {
    if (delivery == null || handler == null) {
      throw new IllegalArgumentException("receive needs a delivery and a handler (not null)");
    }
    Instant signedAt;
    try {
      signedAt = signature.verify(delivery);
    } catch (WebhookSignature.Refused refused) {
      return problem(refused.malformed()
          ? new Problem(400, "webhook-signature-malformed", "Webhook signature is missing or malformed", refused.getMessage())
          : new Problem(401, "webhook-signature-invalid", "Webhook signature does not match", refused.getMessage()));
    }
    String id = eventId.apply(delivery);
    try {
      IdempotencyKey.check("event id", id);
    } catch (IllegalArgumentException e) {
      return problem(new Problem(400, "webhook-event-id-missing", "Webhook event id is missing or invalid",
          "The delivery is signed but carries no usable event id: " + e.getMessage()));
    }
    Execution<Void> outcome;
    try {
      outcome = idem.inTransaction(tx -> {
        if (signedAt != null) {
          Duration skew = Duration.between(signedAt, DatabaseClock.now(tx)).abs();
          if (skew.compareTo(tolerance) > 0) {
            throw new Stale(signedAt, tolerance);
          }
        }
        return inbox.receive(id, t -> handler.handle(t, delivery));
      });
    } catch (Stale stale) {
      return problem(new Problem(401, "webhook-timestamp-outside-tolerance", "Webhook timestamp is outside the tolerance",
          stale.getMessage()));
    }
    if (outcome instanceof Execution.InFlight<Void> inFlight) {
      long seconds = Math.max(1, (inFlight.retryAfter().toMillis() + 999) / 1000);
      Map<String, String> headers = new LinkedHashMap<>(problemHeaders());
      headers.put("Retry-After", Long.toString(seconds));
      Problem p = new Problem(409, "webhook-event-in-flight", "This event is being processed",
          "A delivery of the same event is being processed. Deliver it again later; it is answered 200 once applied.");
      return new Answer(409, headers, new String(p.json(problemTypeBase), StandardCharsets.UTF_8));
    }
    return new Answer(200, outcome.replayed() ? Map.of(IdempotencyKeyFilter.IDEMPOTENT_REPLAYED, "true") : Map.of(), "");
  }

  /**
   * {@link #receive(WebhookDelivery, Handler)} for a servlet request: reads the body (at most
   * {@link Builder#maxBodySize}, else 413) and writes the answer to {@code response}.
   *
   * @throws ServletException wrapping a checked exception of the handler (the container answers 500)
   */
  public void receive(HttpServletRequest request, HttpServletResponse response, Handler handler)
      throws IOException, ServletException {
    byte[] body = BufferedRequest.read(request, maxBodySize);
    Answer answer;
    if (body == null) {
      answer = problem(Problem.tooLarge(maxBodySize));
    } else {
      Map<String, List<String>> headers = new LinkedHashMap<>();
      for (String name : Collections.list(request.getHeaderNames())) {
        headers.put(name, new ArrayList<>(Collections.list(request.getHeaders(name))));
      }
      try {
        answer = receive(WebhookDelivery.of(headers, body), handler);
      } catch (IOException | ServletException | RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new ServletException("the webhook handler failed; the event was rolled back and its sender will deliver it again", e);
      }
    }
    byte[] bytes = answer.body().getBytes(StandardCharsets.UTF_8);
    response.setStatus(answer.status());
    answer.headers().forEach(response::setHeader);
    response.setContentLength(bytes.length);
    if (bytes.length > 0) {
      response.getOutputStream().write(bytes);
    }
    response.flushBuffer();
  }

  /** Deletes event ids past the window, in batches; call it from a scheduler. Returns how many. */
  public long expire() {
    return inbox.expire();
  }

  private Answer problem(Problem p) {
    return new Answer(p.status(), problemHeaders(), new String(p.json(problemTypeBase), StandardCharsets.UTF_8));
  }

  private static Map<String, String> problemHeaders() {
    return Map.of("Content-Type", "application/problem+json", "Cache-Control", "no-store");
  }

  /** Thrown in the transaction to roll it back: the delivery was signed too long ago (or ahead). */
  private static final class Stale extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Stale(Instant signedAt, Duration tolerance) {
      super("The delivery was signed at " + signedAt + " (the sender's clock), more than " + tolerance.toSeconds()
          + " s from this service's time. A fresh delivery from the sender is signed anew.", null, false, false);
    }
  }

  /**
   * Configures a {@link WebhookReceiver}. Each setter checks its argument and throws an {@link
   * IllegalArgumentException} naming it. Not thread-safe.
   */
  public static final class Builder {
    private final Idem idem;
    private final String consumer;
    private final WebhookSignature signature;
    private Function<WebhookDelivery, String> eventId;
    private DedupeWindow window = DedupeWindow.WEBHOOK_RETRIES;
    private Duration tolerance = Duration.ofMinutes(5);
    private URI problemTypeBase = URI.create(IdempotencyKeyFilter.DEFAULT_PROBLEM_TYPE_BASE);
    private int maxBodySize = 1024 * 1024;

    private Builder(Idem idem, String consumer, WebhookSignature signature) {
      this.idem = notNull(idem, "idem");
      this.consumer = IdempotencyKey.check("consumer", notNull(consumer, "consumer"));
      this.signature = notNull(signature, "signature");
    }

    /** Where the event id is read; default the signature's ({@link WebhookSignature#eventId}). */
    public Builder eventId(Function<WebhookDelivery, String> eventId) {
      this.eventId = notNull(eventId, "eventId");
      return this;
    }

    /** How long an event id is remembered; default {@link DedupeWindow#WEBHOOK_RETRIES} (3 days). */
    public Builder window(DedupeWindow window) {
      this.window = notNull(window, "window");
      return this;
    }

    /**
     * How far the sender's signing time may be from the database clock, either way; default 5
     * minutes (Stripe's and Svix's). Ignored for a signature that returns no time.
     */
    public Builder tolerance(Duration tolerance) {
      notNull(tolerance, "tolerance");
      if (tolerance.isNegative() || tolerance.isZero()) {
        throw new IllegalArgumentException("tolerance must be positive, was " + tolerance);
      }
      this.tolerance = tolerance;
      return this;
    }

    /** Base of the problem {@code type}s, as {@link IdempotencyKeyFilter.Builder#problemTypeBase}. */
    public Builder problemTypeBase(URI base) {
      this.problemTypeBase = notNull(base, "problemTypeBase");
      return this;
    }

    /** The largest body the servlet form reads, in bytes; default 1 MiB; larger: 413. */
    public Builder maxBodySize(int bytes) {
      this.maxBodySize = IdempotencyKeyFilter.Builder.checkedMaxBodySize(bytes);
      return this;
    }

    /** Builds the receiver and its inbox; writes nothing. */
    public WebhookReceiver build() {
      return new WebhookReceiver(this);
    }

    private static <T> T notNull(T value, String argument) {
      if (value == null) {
        throw new IllegalArgumentException(argument + " must not be null");
      }
      return value;
    }
  }
}
