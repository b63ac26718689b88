package dev.idem.spring.testing;

import dev.idem.spring.Idempotent;
import java.util.Map;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
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

    Orders(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
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

    private ResponseEntity<Map<String, Object>> insert(Order order) {
      jdbc.update("INSERT INTO orders (order_id, amount) VALUES (?, ?)", order.order(), order.amount());
      return ResponseEntity.status(201).body(Map.of("order", order.order()));
    }
  }
}
