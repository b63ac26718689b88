package dev.idem.spring.testing;

import static dev.idem.testing.Delivery.CONCURRENT;
import static dev.idem.testing.Delivery.KILLED_AFTER_COMMIT;
import static dev.idem.testing.Delivery.KILLED_BEFORE_COMMIT;
import static dev.idem.testing.Delivery.REPLY_LOST;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.post;

import dev.idem.testing.RepeatReport;
import dev.idem.testing.Target;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.Targets;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpRequest.BodyPublishers;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.autoconfigure.web.servlet.AutoConfigureMockMvc;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.http.MediaType;
import org.springframework.test.web.servlet.MockMvc;

/**
 * The kit on a Boot application, as a user's test would run it: repeats delivered to the shop's
 * endpoints over real HTTP and through MockMvc, its commits killed on its own pool. It must fail
 * the unguarded endpoint and the one that commits its effect apart from the key, naming the copy
 * that made the extra row, and pass the guarded one.
 */
@SpringBootTest(classes = ShopApplication.class, webEnvironment = WebEnvironment.RANDOM_PORT,
    properties = "idem.relay.enabled=false")
@AutoConfigureIdemTest
@AutoConfigureMockMvc
class ServiceRepeatsTest {
  @Autowired ServiceRepeats repeats;
  @Autowired TestDatabase db;
  @Autowired MockMvc mvc;
  @LocalServerPort int port;

  private Target http(String path) {
    return Targets.http(copy -> HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
        .header("Content-Type", "application/json").header("X-Shop", "s1").header("Idempotency-Key", copy.key())
        .POST(BodyPublishers.ofString(body(copy.intent()))).build());
  }

  private static String body(String order) {
    return "{\"order\":\"" + order + "\",\"amount\":5}";
  }

  /** Orders with more than one row, of those the report's trials placed. */
  private long duplicated(RepeatReport report) {
    return report.trials().stream().filter(t -> db.count("SELECT count(*) FROM orders WHERE order_id = ?", t.intent()) > 1).count();
  }

  @Test
  void theGuardedEndpointLeavesOneOrderPerIntentUnderEveryDeliveryWithinTheGuarantee() {
    RepeatReport report = repeats.effectsIn("orders", "order_id").target(http("/orders"))
        .deliver(CONCURRENT, REPLY_LOST, KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT).run();
    report.assertOneEffectPerIntent();
    assertThat(report.trials()).hasSizeGreaterThanOrEqualTo(4);
    assertThat(duplicated(report)).isZero();
    for (RepeatReport.Trial t : report.trials()) {
      assertThat(db.count("SELECT count(*) FROM orders WHERE order_id = ?", t.intent())).as(t.intent()).isEqualTo(1);
    }
  }

  @Test
  void throughMockMvcToo() {
    RepeatReport report = repeats.effectsIn("orders", "order_id")
        .target(MockMvcTarget.of(mvc, copy -> post("/orders").contentType(MediaType.APPLICATION_JSON)
            .header("X-Shop", "s1").header("Idempotency-Key", copy.key()).content(body(copy.intent()))))
        .deliver(CONCURRENT, REPLY_LOST, KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT).run();
    report.assertOneEffectPerIntent();
    assertThat(duplicated(report)).isZero();
  }

  @Test
  void theUnguardedEndpointFailsNamingTheCopiesThatChargedAgain() {
    RepeatReport report = repeats.effectsIn("orders", "order_id").target(http("/unguarded-orders"))
        .deliver(CONCURRENT, REPLY_LOST).run();
    assertThatThrownBy(report::assertOneEffectPerIntent).isInstanceOf(AssertionError.class)
        .hasMessageContaining("FAIL CONCURRENT").hasMessageContaining("8 effects")
        .hasMessageContaining("FAIL REPLY_LOST").hasMessageContaining("copy 2");
    assertThat(duplicated(report)).isEqualTo(2);
  }

  @Test
  void anEffectCommittedApartFromItsKeyFailsTheKillBetweenThem() {
    RepeatReport report = repeats.effectsIn("orders", "order_id").target(http("/detached-orders"))
        .deliver(KILLED_BEFORE_COMMIT).run();
    assertThatThrownBy(report::assertOneEffectPerIntent).isInstanceOf(AssertionError.class)
        .hasMessageContaining("FAIL KILLED_BEFORE_COMMIT (writing commit 2 of 2)")
        .hasMessageContaining("killed before it reached the server");
    assertThat(duplicated(report)).isEqualTo(1);
  }
}
