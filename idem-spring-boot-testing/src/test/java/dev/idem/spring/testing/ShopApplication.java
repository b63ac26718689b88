package dev.idem.spring.testing;

import dev.idem.spring.Idempotent;
import java.util.Map;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.support.TransactionTemplate;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * A service as a user writes one: {@code POST /orders} guarded by {@link Idempotent}, and {@code
 * POST /unguarded-orders}, the same handler without it (the defect the kit must catch).
 */
@SpringBootApplication
public class ShopApplication {
  record Order(String order, int amount) {}

  @RestController
  static class Orders {
    private final JdbcTemplate jdbc;
    private final TransactionTemplate detached;

    Orders(JdbcTemplate jdbc, PlatformTransactionManager transactions) {
      this.jdbc = jdbc;
      this.detached = new TransactionTemplate(transactions);
      this.detached.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRES_NEW);
    }

    @Idempotent
    @PostMapping("/orders")
    ResponseEntity<Map<String, Object>> place(@RequestBody Order order) {
      return insert(order);
    }

    @PostMapping("/unguarded-orders")
    ResponseEntity<Map<String, Object>> placeUnguarded(@RequestBody Order order) {
      return insert(order);
    }

    /** A defect: guarded, but the effect commits in a transaction of its own, apart from the key. */
    @Idempotent
    @PostMapping("/detached-orders")
    ResponseEntity<Map<String, Object>> placeDetached(@RequestBody Order order) {
      return detached.execute(status -> insert(order));
    }

    private ResponseEntity<Map<String, Object>> insert(Order order) {
      jdbc.update("INSERT INTO orders (order_id, amount) VALUES (?, ?)", order.order(), order.amount());
      return ResponseEntity.status(201).body(Map.of("order", order.order()));
    }
  }
}
