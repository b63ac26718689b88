package dev.idem.jdbc.notify;

import dev.idem.internal.base.Require;

/**
 * What a {@link Sender} is handed: the notification, and the collapse id to give the provider.
 *
 * <p>Built by idem; implement it only to hand a fake to your own code in a test.
 */
public interface Outgoing {
  /** What to send. */
  Notification notification();

  /**
   * Derived from the notification's id with {@code Keys.child} (64 lower-case hex characters,
   * within APNs' 64-byte limit), the same for every attempt and channel: put it in APNs' {@code
   * apns-collapse-id} header or FCM's {@code collapse_key}, so a repeated push replaces the first
   * on the device instead of showing twice.
   */
  String collapseId();

  /**
   * Whether this attempt took the claim over from a sender whose lease ended (the earlier send
   * may or may not have happened).
   */
  boolean takeover();
}
