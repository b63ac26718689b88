package dev.idem.jdbc.notify;

import java.time.Duration;
import java.time.Instant;

/**
 * What {@link Notifications#send} did with one notification. A refused send is a result, never an
 * exception: {@link Duplicate}, {@link InFlight} and {@link Capped} all mean "not sent by this call".
 */
public sealed interface SendResult {

  /** This call handed the message to the sender. */
  sealed interface Sent extends SendResult permits SendResultValue.SentValue {
    /** The collapse id the sender was given. */
    String collapseId();

    /** Whether the claim was taken over from a sender whose lease ended. */
    boolean takeover();
  }

  /**
   * An earlier copy of this notification on this channel was sent ({@link
   * Delivery#AT_LEAST_ONCE_MAY_REPEAT}) or claimed for sending ({@link
   * Delivery#AT_MOST_ONCE_MAY_LOSE}, where it may have been lost) at {@code firstAt}, database clock.
   * Not sent again: acknowledge the redelivery.
   */
  sealed interface Duplicate extends SendResult permits SendResultValue.DuplicateValue {
    /** When the earlier copy was sent or claimed, by the database clock. */
    Instant firstAt();
  }

  /**
   * Another sender holds the claim and its lease is live: not sent. Redeliver after {@code
   * retryAfter}; if that sender died, its lease will have ended and the redelivery sends.
   */
  sealed interface InFlight extends SendResult permits SendResultValue.InFlightValue {
    /** When to redeliver. */
    Duration retryAfter();
  }

  /**
   * Refused by the recipient's cap: {@code cap.limit()} sends within {@code cap.per()} already. Not
   * sent, and recorded so: a redelivery of this notification is answered {@code Capped} again,
   * never sent later.
   */
  sealed interface Capped extends SendResult permits SendResultValue.CappedValue {
    /** The recipient whose cap refused the send. */
    String recipient();

    /** The cap that refused it. */
    Cap cap();
  }
}
