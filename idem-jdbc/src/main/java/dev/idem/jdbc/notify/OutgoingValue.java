package dev.idem.jdbc.notify;

import dev.idem.internal.base.Require;

/** The one implementation of {@link Outgoing}: a value, built by idem only. */
record OutgoingValue(Notification notification, String collapseId, boolean takeover) implements Outgoing {
  OutgoingValue {
    Require.notNull(notification, "notification");
    Require.notNull(collapseId, "collapseId");
  }
}
