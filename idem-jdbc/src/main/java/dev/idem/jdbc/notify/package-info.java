/**
 * Effects that cannot be made idempotent (an email, an SMS, a push): the direction of failure
 * chosen per message type ({@link dev.idem.jdbc.notify.Delivery}), a leased claim per notification
 * and channel, a cap per recipient, and a collapse id for the provider. Entry point: {@code
 * Idem.notifications(type)}.
 */
package dev.idem.jdbc.notify;
