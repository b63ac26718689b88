package dev.idem.jdbc.notify;

import dev.idem.internal.base.Require;
import java.time.Duration;
import java.time.Instant;

/**
 * What {@link Notifications#send} did with one notification. A refused send is a result, never an
 * exception: {@link Duplicate}, {@link InFlight} and {@link Capped} all mean "not sent by this call".
 */
public sealed interface SendResult {

  /** Whether this call handed the message to the sender. */
  default boolean sent() {
    return this instanceof Sent;
  }

  /**
   * This call handed the message to the sender.
   *
   * @param collapseId the collapse id the sender was given
   * @param takeover whether the claim was taken over from a sender whose lease ended
   */
  record Sent(String collapseId, boolean takeover) implements SendResult {
    public Sent {
      Require.notNull(collapseId, "collapseId");
    }
  }

  /**
   * An earlier copy of this notification on this channel was sent ({@link
   * Delivery#AT_LEAST_ONCE_MAY_REPEAT}) or claimed for sending ({@link
   * Delivery#AT_MOST_ONCE_MAY_LOSE}, where it may have been lost) at {@code firstAt}, database clock.
   * Not sent again: acknowledge the redelivery.
   */
  record Duplicate(Instant firstAt) implements SendResult {
    public Duplicate {
      Require.notNull(firstAt, "firstAt");
    }
  }

  /**
   * Another sender holds the claim and its lease is live: not sent. Redeliver after {@code
   * retryAfter}; if that sender died, its lease will have ended and the redelivery sends.
   */
  record InFlight(Duration retryAfter) implements SendResult {
    public InFlight {
      Require.notNull(retryAfter, "retryAfter");
    }
  }

  /**
   * Refused by the recipient's cap: {@code cap.limit()} sends within {@code cap.per()} already. Not
   * sent, and recorded so: a redelivery of this notification is answered {@code Capped} again,
   * never sent later.
   */
  record Capped(String recipient, Cap cap) implements SendResult {
    public Capped {
      Require.notNull(recipient, "recipient");
      Require.notNull(cap, "cap");
    }
  }
}
