package dev.idem.testing;

/**
 * One copy of an intent, as {@link Repeats} hands it to your {@link Target}: build the request or
 * message from it, so the kit needs to know neither header names nor body formats.
 *
 * @param delivery the delivery this copy belongs to
 * @param intent the business key of the intent, fresh for each trial: put it where your service
 *     takes the value it writes to the effect table's key column (e.g. the order id in the body).
 *     Its form follows the column's type: a UUID for {@code uuid}, a number for integer columns,
 *     else text such as {@code reply-lost-3f9a1c}
 * @param key the idempotency key (or message id) to send: the same for every copy of one intent,
 *     except under {@link Delivery#FRESH_KEY}, and per message under {@link
 *     Delivery#OUT_OF_ORDER}. A UUIDv7, so the partitioned layout accepts it too
 * @param number the copy's number within its trial, from 1
 * @param sequence the message's sequence number under {@link Delivery#OUT_OF_ORDER} (1..n); 1
 *     otherwise
 */
public record Copy(Delivery delivery, String intent, String key, int number, int sequence) {
  /** Checks that every part is present. */
  public Copy {
    if (delivery == null || intent == null || key == null) {
      throw new IllegalArgumentException("a copy needs a delivery, an intent and a key, was " + delivery + ", " + intent + ", " + key);
    }
    if (number < 1 || sequence < 1) {
      throw new IllegalArgumentException("a copy's number and sequence start at 1, were " + number + " and " + sequence);
    }
  }
}
