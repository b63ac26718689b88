package dev.idem.jdbc.notify;

import dev.idem.key.IdempotencyKey;

/**
 * One notification on one channel: what the claim is on ({@code id}, {@code channel}) and whom the
 * cap counts it for ({@code recipient}). Each is checked like an idempotency key (visible ASCII, 1
 * to 255).
 *
 * @param id the notification's id, made once from the intent it reports, never per attempt (e.g.
 *     {@code Keys.child(orderKey, "email/shipped").value()}): every redelivery carries the same one
 * @param channel {@code email}, {@code sms}, {@code push}, ...: the same id on two channels is two
 *     messages
 * @param recipient what a {@link Cap} counts per: the order, the user, the phone number
 */
public record Notification(String id, String channel, String recipient) {
  /** @throws IllegalArgumentException naming the bad part */
  public Notification {
    IdempotencyKey.check("notification id", id);
    IdempotencyKey.check("channel", channel);
    IdempotencyKey.check("recipient", recipient);
    if (("notify/" + channel).length() > IdempotencyKey.MAX_LENGTH) {
      throw new IllegalArgumentException("channel is " + channel.length() + " characters long; at most "
          + (IdempotencyKey.MAX_LENGTH - "notify/".length()) + " are allowed");
    }
  }
}
