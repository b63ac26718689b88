package dev.idem.examples.boot;

import dev.idem.jackson.JacksonCodec;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.Outbox;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/**
 * Pays an order: charges the card at the provider (an external effect, keyed by the order, so a
 * repeat of the request that reaches here, after the HTTP key's window or from another route, never
 * charges twice), then records the payment and a "payment captured" message in the caller's
 * transaction.
 */
@Service
class Checkout {
  private final IdempotentExecutor charges;
  private final CardProvider provider;
  private final Outbox outbox;
  private final JdbcTemplate jdbc;

  Checkout(@Qualifier("charges") IdempotentExecutor charges, CardProvider provider, Outbox outbox, JdbcTemplate jdbc) {
    this.charges = charges;
    this.provider = provider;
    this.outbox = outbox;
    this.jdbc = jdbc;
  }

  /** What the provider answered, stored with the charge's key and replayed to every repeat. */
  record Charge(String id, String declined) {}

  record Result(String chargeId, String reason) {
    boolean declined() {
      return reason != null;
    }
  }

  @Transactional
  public Result pay(String order, int amount) {
    // The charge commits its own key (phase 1) before the call goes out: it never joins this
    // transaction, so a rollback here cannot forget a charge the provider made.
    Charge charge;
    try {
      charge = charges.executeExternal(IdempotencyKey.of("charge", order),
          Fingerprint.ofFields(Map.of("order", order, "amount", amount)), JacksonCodec.of(Charge.class),
          attempt -> provider.charge(attempt.callKey(), amount)).value(); // InFlightException: another request charges it now
    } catch (IOException e) {
      // Unknown outcome at the provider: the charge's lease is ended, so a retry of this request
      // takes the charge over with the same key. Unchecked, so this transaction rolls back.
      throw new UncheckedIOException("charging " + order + ": " + e.getMessage(), e);
    }
    if (charge.declined() != null) {
      return new Result(null, charge.declined());
    }
    jdbc.update("INSERT INTO payments (order_id, amount, charge_id) VALUES (?, ?, ?)", order, amount, charge.id());
    outbox.enqueue(NewMessage.of("payment-captured", order.getBytes(StandardCharsets.UTF_8)).withAggregateKey(order));
    return new Result(charge.id(), null);
  }
}
