package dev.idem.jdbc;

import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.window.DedupeWindow;
import dev.idem.window.RepeatSource;
import java.util.Map;
import javax.sql.DataSource;

/**
 * The README's quick start, run by {@link QuickStartTest} (the README's block, imports included, is
 * also compiled by idem-examples' DocsSnippetsTest). Public API only.
 */
final class QuickStart {
  private QuickStart() {}

  static Execution<String> pay(DataSource dataSource) {
    // quick-start:begin
    Idem idem = Idem.builder(dataSource).build();     // your pool, e.g. HikariCP
    IdemFlyway.migrate(dataSource);                   // idem's own tables, in schema "idem"

    IdempotentExecutor payments = idem.executor()
        .window(DedupeWindow.covering(RepeatSource.CLIENT_RETRY))
        .build();

    // The client made the key once, when the checkout opened, and sends it on every retry.
    String idempotencyKeyHeader = "k-7f3a9c";          // the request's Idempotency-Key header
    IdempotencyKey key = IdempotencyKey.of("shop-42", idempotencyKeyHeader);
    Fingerprint request = Fingerprint.ofFields(Map.of("order", "o1", "amount", 4000));

    Execution<String> charge = payments.execute(key, request, Codec.utf8(), tx -> {
      tx.dsl().execute("INSERT INTO payments (order_id, amount) VALUES (?, ?)", "o1", 4000);
      return "pay_o1";                                // stored with the key, replayed to repeats
    });
    // First call: charge.applied(). Any retry of the same key: charge.replayed(), the same
    // "pay_o1", and still one row in payments. The same key with another amount: KeyReuseException.
    // quick-start:end
    return charge;
  }
}
