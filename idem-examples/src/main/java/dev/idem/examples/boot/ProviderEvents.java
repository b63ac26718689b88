package dev.idem.examples.boot;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Service;

/**
 * The card provider's webhook events, applied once per event id however often the provider
 * delivers them (it retries for days): {@link ProviderWebhook} calls {@link #apply} in the
 * transaction that claims the event's id, and JdbcTemplate writes in it, so an event that fails
 * half-way leaves neither its row nor its id, and the provider's redelivery applies it whole.
 */
@Service
class ProviderEvents {
  private final JdbcTemplate jdbc;

  ProviderEvents(JdbcTemplate jdbc) {
    this.jdbc = jdbc;
  }

  /** A webhook event, as the provider sends it. */
  record Event(String id, String type, String order) {}

  void apply(Event event) {
    jdbc.update("INSERT INTO provider_events (event_id, order_id, type) VALUES (?, ?, ?)", event.id(), event.order(), event.type());
    if ("charge.refunded".equals(event.type())
        && jdbc.update("UPDATE payments SET refunded = true WHERE order_id = ?", event.order()) == 0) {
      // The refund arrived before the payment it refunds: fail, so the row above rolls back with
      // the event's id, and apply it whole when the provider delivers it again.
      throw new IllegalStateException("no payment of order " + event.order() + " yet");
    }
  }
}
