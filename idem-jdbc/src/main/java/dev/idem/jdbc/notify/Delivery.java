package dev.idem.jdbc.notify;

/**
 * Which way a message type fails when its sender dies between "sent" and "recorded": the seed's
 * first decision for an effect with no key, no state and no undo. The window between the two cannot
 * be closed; this chooses what it costs.
 */
public enum Delivery {
  /**
   * Record "sending", then send (claim first). After a crash between the two the message is lost,
   * never repeated. Right for marketing, digests, nice-to-have nudges.
   */
  AT_MOST_ONCE_MAY_LOSE,
  /**
   * Send, then record "sent", under a leased claim. After a crash between the two the message is
   * sent again once the lease ends. Right for login codes, security alerts, receipts.
   */
  AT_LEAST_ONCE_MAY_REPEAT
}
