package dev.idem.examples.boot;

import static dev.idem.testing.Delivery.CONCURRENT;
import static dev.idem.testing.Delivery.FRESH_KEY;
import static dev.idem.testing.Delivery.KILLED_AFTER_COMMIT;
import static dev.idem.testing.Delivery.KILLED_BEFORE_COMMIT;
import static dev.idem.testing.Delivery.REPLY_LOST;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.spring.testing.AutoConfigureIdemTest;
import dev.idem.spring.testing.ServiceRepeats;
import dev.idem.testing.RepeatReport;
import dev.idem.testing.Targets;
import dev.idem.testing.TestDatabase;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpRequest.BodyPublishers;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/**
 * The Boot payments sample proved as docs/testing.md shows a user: {@code POST /payments}
 * receives each intent in every way a hop repeats it, with its own transaction's backend
 * terminated at each commit it makes. One payment row per order and one charge at the provider per
 * order, whatever was repeated. The client honours {@code Retry-After}, as a safe client does.
 */
@SpringBootTest(classes = PaymentsApplication.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
    "idem.relay.enabled=false", // the relay's commits would take the kit's kills
    // A charge whose claim committed but whose reply was lost is held by nobody the client can
    // reach: its retries get 409 with Retry-After until the lease ends, then take it over. Short
    // here so that happens within the kit's 30 s per copy (90 s in application.properties).
    "idem.executors.charges.lease=4s"})
@AutoConfigureIdemTest
class PaymentsRepeatsTest {
  static final CardProviderServer provider = startProvider();

  @Autowired ServiceRepeats repeats;
  @Autowired TestDatabase db;
  @LocalServerPort int port;

  private static CardProviderServer startProvider() {
    try {
      return new CardProviderServer();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @DynamicPropertySource
  static void provider(DynamicPropertyRegistry properties) {
    properties.add("payments.provider-url", () -> provider.url().toString());
  }

  @AfterAll
  static void stopProvider() {
    provider.close();
  }

  private RepeatReport pay(dev.idem.testing.Delivery... deliveries) {
    return repeats.effectsIn("payments", "order_id")
        .target(Targets.http(copy -> HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/payments"))
            .header("Idempotency-Key", copy.key()).header("X-Merchant-Id", "shop-1").header("Content-Type", "application/json")
            .POST(BodyPublishers.ofString("{\"order\":\"" + copy.intent() + "\",\"amount\":4000}")).build()))
        .deliver(deliveries).run();
  }

  @Test
  void onePaymentAndOneChargePerOrderWhateverIsRepeatedOrKilled() {
    int chargesBefore = provider.charges.size();
    RepeatReport report = pay(CONCURRENT, REPLY_LOST, KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT);
    report.assertOneEffectPerIntent();
    for (RepeatReport.Trial t : report.trials()) {
      assertThat(db.count("SELECT count(*) FROM payments WHERE order_id = ?", t.intent())).as(t.intent()).isEqualTo(1);
    }
    assertThat(provider.charges.size() - chargesBefore).as("charges at the provider, one per order")
        .isEqualTo(report.trials().size());
  }

  @Test
  void aRetryWithAFreshKeyIsANewPaymentToTheService_shownAsOutsideTheGuarantee() {
    RepeatReport report = pay(FRESH_KEY);
    RepeatReport.Trial t = report.trials().get(0);
    assertThat(t.asserted()).isFalse();
    assertThat(db.count("SELECT count(*) FROM payments WHERE order_id = ?", t.intent())).isEqualTo(t.effects());
    assertThat(report.toString()).contains("FRESH_KEY").contains("outside idem's guarantee");
  }
}
