package dev.idem.examples.boot;

import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.outbox.OutboxMessage;
import java.nio.charset.StandardCharsets;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/**
 * The consumer: one receipt per "payment captured" message, however often it is delivered. The
 * inbox claims the message id in this transaction, so the receipt and the claim commit together.
 */
@Service
class Receipts {
  private final Inbox inbox;
  private final JdbcTemplate jdbc;

  Receipts(@Qualifier("receipts") Inbox inbox, JdbcTemplate jdbc) {
    this.inbox = inbox;
    this.jdbc = jdbc;
  }

  @Transactional
  public void onPaymentCaptured(OutboxMessage m) {
    String order = new String(m.payload(), StandardCharsets.UTF_8);
    inbox.receive(m.id().toString(), tx -> jdbc.update("INSERT INTO receipts (order_id, message_id) VALUES (?, ?)", order, m.id()));
  }
}
