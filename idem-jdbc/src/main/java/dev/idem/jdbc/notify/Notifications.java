package dev.idem.jdbc.notify;

import dev.idem.internal.Events;
import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.claim.Binds;
import dev.idem.jdbc.internal.claim.ClaimRow;
import dev.idem.jdbc.internal.claim.ClaimTable;
import dev.idem.jdbc.internal.claim.Claims;
import dev.idem.jdbc.internal.claim.ExternalClaims;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;

/**
 * Sends one message type (an order's receipt email, a login code SMS, a shipping push) so that
 * repeats are bounded: the seed's step 8, for effects with no key, no state and no undo.
 *
 * <pre>{@code
 * Notifications receipts = idem.notifications("receipt-email")
 *     .delivery(Delivery.AT_LEAST_ONCE_MAY_REPEAT)            // a receipt may repeat, never be lost
 *     .cap(new Cap("transactional-email", 3, Duration.ofHours(1)))
 *     .build();
 * SendResult r = receipts.send(new Notification(receiptId, "email", orderId), out -> mailer.send(out));
 * }</pre>
 *
 * <h2>Guarantees</h2>
 *
 * <ul>
 *   <li>A claim on (notification id, channel), in idem's key table with a lease of {@link
 *       Builder#lease} (default 2 minutes, database clock), is taken before anything is sent. While
 *       the first sender's lease is live a redelivery is not sent ({@link SendResult.InFlight});
 *       once it ended without a record (the sender died) a redelivery takes the claim over with a
 *       higher fencing token and sends ({@link SendResult.Sent#takeover()}). After the record, every
 *       redelivery within the {@link Builder#window} is {@link SendResult.Duplicate}.
 *   <li>{@link Delivery#AT_MOST_ONCE_MAY_LOSE}: the record ("sending") is committed before the send.
 *       A crash after it loses the message; nothing ever sends it twice.
 *   <li>{@link Delivery#AT_LEAST_ONCE_MAY_REPEAT}: the record ("sent") is committed after the send.
 *       A crash between them repeats the message after the lease; it is never lost while a
 *       redelivery comes. A send that throws ends the lease at once, so the redelivery sends at once.
 *   <li>With a {@link Cap}, a send takes a place in the recipient's count in one statement (an
 *       upsert that PostgreSQL serialises on the recipient's row; on MariaDB a transaction of its
 *       own that locks the row with {@code INSERT … ON DUPLICATE KEY UPDATE}, reads its times and
 *       the database clock, and writes them back): any number of concurrent senders never exceed
 *       the limit within the window, at every isolation level. A refused send is {@link
 *       SendResult.Capped}, recorded with the claim, so a redelivery is refused too.
 *   <li>Claim, takeover and record are the executor's external-effect protocol (one engine): a
 *       redelivery is told {@link SendResult.InFlight} with the live lease's time left (or, after
 *       losing every round to other senders, a lease); a serialization failure of a pool at
 *       REPEATABLE READ or SERIALIZABLE never escapes a claim; a record that fails on 40001 or a
 *       dead connection is tried again on a fresh connection; one that fails for good is thrown
 *       and, if the database did not answer, made in the background as soon as it does (else
 *       the lease is ended, so a redelivery sends at once). Only a redelivery of the
 *       same notification (same type and recipient) is a takeover; a claim taken again past the
 *       window from another intent's unfinished row is not.
 *   <li>Every sender is handed the same collapse id for the notification ({@code Keys.child} of its
 *       id), for APNs' {@code apns-collapse-id} or FCM's {@code collapse_key}.
 *   <li>The same notification id with another type or recipient is refused with {@link
 *       KeyReuseException}; nothing is sent.
 * </ul>
 *
 * <h2>Where it stops</h2>
 *
 * <ul>
 *   <li>The window between the send and its record cannot be closed; this only chooses its
 *       direction and keeps it as short as the send. Make the content survive a repeat ("Your order
 *       42 shipped", the same OTP while valid), and send irreversible effects last.
 *   <li>A cap place taken for a send that then failed stays taken: the send may have happened.
 *   <li>Claims are kept in idem's key table for the window; like external effects' keys they are not
 *       deleted by the executor's expiry (their fencing tokens must keep growing).
 *   <li>Never joins a transaction: the claim must be committed before the message goes out.
 * </ul>
 *
 * <p>Thread-safe and immutable; build one per message type and share it.
 */
public final class Notifications {
  static final String SENT = "sent";
  static final String CAPPED = "capped";

  private final Context context;
  private final String type;
  private final Delivery delivery;
  private final Cap cap;
  private final Claims claims;
  private final ExternalClaims external;
  private final CapPlaces places;

  private Notifications(Builder b) {
    this.context = b.context;
    this.type = b.type;
    this.delivery = b.delivery;
    this.cap = b.cap;
    Events events = Events.to(context.listener(), "notifications:" + type);
    // Redeliveries are answered at once from the row: no wait for the first sender.
    ClaimTable table = new ClaimTable(context, ClaimTable.Layout.KEYS, b.window.length(), Duration.ZERO, b.lease);
    // A redelivery that lost every round to other senders retries after a lease: one of them holds it.
    this.claims = new Claims(context, table, events, b.window, b.lease, "idem notifications");
    this.external = new ExternalClaims(claims, Duration.ZERO);
    this.places = cap == null ? null : new CapPlaces(context, cap);
  }

  static {
    Factories.register(Notifications.class, String.class, Builder.class, Builder::new);
  }

  /** The message type, as configured. */
  String type() {
    return type;
  }

  /** The direction of failure this type chose. */
  Delivery delivery() {
    return delivery;
  }

  /**
   * The collapse id of a notification: {@code Keys.child} of its id, the same on every attempt,
   * channel and machine.
   */
  static String collapseId(String notificationId) {
    return Keys.child(IdempotencyKey.of("notify", notificationId), "collapse").value();
  }

  /**
   * Sends {@code notification} through {@code sender}, unless a copy of it was sent, is being sent,
   * or the recipient's cap is reached; see the class comment for the order of claim, record and send.
   *
   * @return {@link SendResult.Sent} if this call handed it to the sender, else why not
   * @throws KeyReuseException if the id was used with another message type or recipient
   * @throws X what the sender threw
   */
  public <X extends Exception> SendResult send(Notification notification, Sender<X> sender) throws X {
    Require.notNull(notification, "notification");
    Require.notNull(sender, "sender");
    IdempotencyKey key = IdempotencyKey.of("notify/" + notification.channel(), notification.id());
    Binds binds = new Binds(key, Fingerprint.ofFields(Map.of("type", type, "recipient", notification.recipient())));
    String collapseId = collapseId(notification.id());
    binds.callKey = collapseId;
    ExternalClaims.Claim claim = external.claim(binds);
    if (claim instanceof ExternalClaims.Completed completed) {
      return answered(key, completed.row(), notification);
    }
    if (claim instanceof ExternalClaims.InFlight inFlight) {
      return new SendResultValue.InFlightValue(inFlight.retryAfter());
    }
    ExternalClaims.Held held = (ExternalClaims.Held) claim;
    return attempt(new OutgoingValue(notification, collapseId, held.takeover()), binds, held.fence(), sender);
  }

  /** A claim held under {@code token}: the cap, then record and send in this type's order. */
  private <X extends Exception> SendResult attempt(Outgoing out, Binds binds, long token, Sender<X> sender) throws X {
    if (cap != null && !places.take(out.notification().recipient())) {
      record(binds, token, CAPPED, true);
      return new SendResultValue.CappedValue(out.notification().recipient(), cap);
    }
    if (delivery == Delivery.AT_MOST_ONCE_MAY_LOSE) {
      // recorded before the send: if this record fails, nothing is sent, so it must not be made
      // later in the background (a redelivery would be answered Duplicate): the lease is ended
      if (!record(binds, token, SENT, false)) {
        // The lease ended before the record and another sender took over: it sends, not this one,
        // under a lease of its own, at most this type's lease long.
        return new SendResultValue.InFlightValue(external.inFlight(binds.key(), null).retryAfter());
      }
      sender.send(out);
      return sent(out, binds);
    }
    try {
      sender.send(out);
    } catch (Throwable t) {
      external.endLease(binds, token, t); // "maybe not sent": a redelivery sends at once
      throw t;
    }
    // A false here means the lease ended during the send and another sender took over (and may
    // send too): the message went out either way, which is what at least once allows.
    record(binds, token, SENT, true);
    return sent(out, binds);
  }

  private SendResult sent(Outgoing out, Binds binds) {
    claims.reported(binds.key(), new Execution.Applied<>(null));
    return new SendResultValue.SentValue(out.collapseId(), out.takeover());
  }

  /** A completed claim: sent (or claimed for sending) before, or refused by the cap before. */
  private SendResult answered(IdempotencyKey key, ClaimRow row, Notification n) {
    claims.reported(key, claims.replay(key, Codec.none(), row));
    String outcome = row.result() == null ? SENT : new String(row.result(), StandardCharsets.UTF_8);
    return outcome.equals(CAPPED) && cap != null
        ? new SendResultValue.CappedValue(n.recipient(), cap)
        : new SendResultValue.DuplicateValue(row.completedAt());
  }

  /**
   * Completes the claim with {@code outcome}, fenced by the token, retried as the engine retries a
   * record; false if another sender holds it now. A record that fails for good is thrown; if
   * {@code final} (the outcome is settled: sent, or capped) it is made in the background once the
   * database answers, else (or if the database refused it) the lease is ended so a redelivery sends
   * at once.
   */
  private boolean record(Binds binds, long token, String outcome, boolean settled) {
    return external.record(binds.result(outcome.getBytes(StandardCharsets.UTF_8)), token, settled) != null;
  }

  /**
   * Configures {@link Notifications} for one message type. The delivery is required, so the
   * direction of failure is visible where the type is set up.
   */
  public static final class Builder {
    private final Context context;
    private final String type;
    private Delivery delivery;
    private Duration lease = Duration.ofMinutes(2);
    private Cap cap;
    private DedupeWindow window = DedupeWindow.KAFKA_REPLAY;

    private Builder(Context context, String type) {
      this.context = Require.notNull(context, "context");
      this.type = type;
    }

    /** Which way this type fails between send and record. Required. */
    public Builder delivery(Delivery delivery) {
      this.delivery = delivery;
      return this;
    }

    /**
     * How long a sender's claim stops redeliveries before another may take it over, by the database
     * clock; default 2 minutes. Longer than a send takes, including its timeouts.
     */
    public Builder lease(Duration lease) {
      this.lease = lease;
      return this;
    }

    /** A cap per recipient; none by default. */
    public Builder cap(Cap cap) {
      this.cap = cap;
      return this;
    }

    /**
     * How long a notification is remembered after its claim; default {@link
     * DedupeWindow#KAFKA_REPLAY} (7 days). A redelivery after that is sent again.
     */
    public Builder window(DedupeWindow window) {
      this.window = window;
      return this;
    }

    /** @throws IllegalArgumentException naming the setting that is missing or out of range */
    public Notifications build() {
      IdempotencyKey.check("message type", type);
      Require.notNull(delivery, "delivery (choose AT_MOST_ONCE_MAY_LOSE or AT_LEAST_ONCE_MAY_REPEAT)");
      DbTime.bounded(Require.positive(lease, "lease"), "lease");
      Require.notNull(window, "window");
      return new Notifications(this);
    }
  }
}
