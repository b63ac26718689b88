package dev.idem.examples.boot;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * A payments service on Spring Boot with idem's starter and no glue: {@code POST /payments} is
 * guarded by the client's {@code Idempotency-Key} (the starter's filter), the card is charged at a
 * provider as an external effect carrying a derived key ({@link CardProvider}), the payment row and
 * a "payment captured" message commit with the key ({@link Checkout}), the relay hands the message
 * to a broker ({@link ReceiptBroker}), and a consumer writes one receipt per message through the
 * inbox ({@link Receipts}). Settings: application.properties.
 *
 * <p>Run it against a database and a provider of your own: {@code
 * --spring.datasource.url=jdbc:postgresql://… --payments.provider-url=http://…} (or a {@code
 * jdbc:mariadb://} URL: its own tables come from {@code db/payments/mariadb} then).
 */
@SpringBootApplication
public class PaymentsApplication {
  public static void main(String[] args) {
    SpringApplication.run(PaymentsApplication.class, args);
  }
}
