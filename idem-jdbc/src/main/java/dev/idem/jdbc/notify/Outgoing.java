package dev.idem.jdbc.notify;

import dev.idem.internal.base.Require;

/**
 * What a {@link Sender} is handed: the notification, and the collapse id to give the provider.
 *
 * @param notification what to send
 * @param collapseId derived from the notification's id with {@code Keys.child} (64 lower-case hex
 *     characters, within APNs' 64-byte limit), the same for every attempt and channel: put it in APNs'
 *     {@code apns-collapse-id} header or FCM's {@code collapse_key}, so a repeated push replaces the
 *     first on the device instead of showing twice
 * @param takeover whether this attempt took the claim over from a sender whose lease ended (the
 *     earlier send may or may not have happened)
 */
public record Outgoing(Notification notification, String collapseId, boolean takeover) {
  public Outgoing {
    Require.notNull(notification, "notification");
    Require.notNull(collapseId, "collapseId");
  }
}
