package dev.idem.http;

import static dev.idem.http.HttpFixture.json;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link WebhookReceiver} over real HTTP on loopback (embedded Tomcat) and a real database: every
 * test reads the effect table ({@code webhook_effects}) and the inbox rows ({@code idem_inbox}).
 */
class WebhookReceiverTest extends AbstractHttpTest {
  static final String STRIPE_SECRET = "whsec_test_4eC39HqLyjWDarjtT1zdp7dc";
  static final String SVIX_SECRET = "whsec_" + Base64.getEncoder().encodeToString("a svix test secret, 32 bytes long".getBytes(StandardCharsets.UTF_8));
  URI stripe;
  URI svix;

  @BeforeAll
  void serve() throws Exception {
    f.db.execute("CREATE TABLE webhook_effects (consumer varchar(64) NOT NULL, event_id varchar(255) NOT NULL)");
    stripe = f.serveServlet("/webhooks/stripe", new Receiving(
        WebhookReceiver.builder(f.idem, "stripe", WebhookSignature.stripe(STRIPE_SECRET)).build(), "stripe"));
    svix = f.serveServlet("/webhooks/svix", new Receiving(
        WebhookReceiver.builder(f.idem, "svix", WebhookSignature.svix(SVIX_SECRET)).build(), "svix"));
  }

  /** The user's endpoint: one effect row per event applied; an event whose body says "fail" throws. */
  static final class Receiving extends HttpServlet {
    private static final long serialVersionUID = 1L;
    private final transient WebhookReceiver receiver;
    private final String consumer;

    Receiving(WebhookReceiver receiver, String consumer) {
      this.receiver = receiver;
      this.consumer = consumer;
    }

    @Override
    protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException, ServletException {
      receiver.receive(req, resp, (tx, delivery) -> {
        String body = new String(delivery.body(), StandardCharsets.UTF_8);
        String id = delivery.header("svix-id") != null ? delivery.header("svix-id") : HttpFixture.JSON.readTree(body).get("id").asText();
        tx.dsl().execute("INSERT INTO webhook_effects (consumer, event_id) VALUES (?, ?)", consumer, id);
        if (body.contains("\"fail\"")) {
          throw new IllegalStateException("test: the handler failed after writing its effect");
        }
      });
    }
  }

  static String hmacHex(byte[] key, String content) throws Exception {
    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(key, "HmacSHA256"));
    return HexFormat.of().formatHex(mac.doFinal(content.getBytes(StandardCharsets.UTF_8)));
  }

  static String hmacBase64(byte[] key, String content) throws Exception {
    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(key, "HmacSHA256"));
    return Base64.getEncoder().encodeToString(mac.doFinal(content.getBytes(StandardCharsets.UTF_8)));
  }

  /** A Stripe delivery signed at {@code t} with {@code secret}. */
  HttpResponse<String> stripeDelivery(String body, long t, String secret) throws Exception {
    String signature = "t=" + t + ",v1=" + hmacHex(secret.getBytes(StandardCharsets.UTF_8), t + "." + body);
    return send(stripe, body, "Stripe-Signature", signature);
  }

  HttpResponse<String> svixDelivery(String id, String body, long t) throws Exception {
    byte[] key = Base64.getDecoder().decode(SVIX_SECRET.substring("whsec_".length()));
    String signature = "v1," + hmacBase64(key, id + "." + t + "." + body);
    return send(svix, body, "svix-id", id, "svix-timestamp", Long.toString(t), "svix-signature", "v1,bm90IGl0 " + signature);
  }

  HttpResponse<String> send(URI uri, String body, String... headers) throws Exception {
    HttpRequest.Builder b = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30))
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
    for (int i = 0; i < headers.length; i += 2) {
      b.header(headers[i], headers[i + 1]);
    }
    return f.client.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  long effects(String consumer, String id) {
    return f.db.count("SELECT count(*) FROM webhook_effects WHERE consumer = ? AND event_id = ?", consumer, id);
  }

  long inboxRows(String consumer, String id) {
    return f.db.count("SELECT count(*) FROM idem_inbox WHERE consumer = ? AND message_id = ?", consumer, id);
  }

  static long now() {
    return Instant.now().getEpochSecond();
  }

  static String stripeEvent(String id, String type) {
    return "{\"id\":\"" + id + "\",\"object\":\"event\",\"type\":\"" + type + "\"}";
  }

  @Test
  void aStripeEventDeliveredFourTimesAppliesOnce() throws Exception {
    String id = HttpFixture.unique("evt");
    String body = stripeEvent(id, "charge.refunded");
    List<HttpResponse<String>> answers = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      answers.add(stripeDelivery(body, now(), STRIPE_SECRET)); // Stripe signs each delivery anew
    }

    assertThat(answers).allSatisfy(r -> assertThat(r.statusCode()).isEqualTo(200));
    assertThat(answers.get(0).headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(answers.subList(1, 4)).allSatisfy(r -> assertThat(r.headers().firstValue("Idempotent-Replayed")).hasValue("true"));
    assertThat(effects("stripe", id)).isEqualTo(1);
    assertThat(inboxRows("stripe", id)).isEqualTo(1);
  }

  @Test
  void aSvixMessageDeliveredFourTimesAtOnceAppliesOnce() throws Exception {
    String id = HttpFixture.unique("msg");
    String body = "{\"type\":\"invoice.paid\"}";
    long t = now();
    List<CompletableFuture<HttpResponse<String>>> copies = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      copies.add(CompletableFuture.supplyAsync(() -> {
        try {
          return svixDelivery(id, body, t);
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }));
    }

    for (CompletableFuture<HttpResponse<String>> c : copies) {
      int status = c.get().statusCode();
      assertThat(status).isIn(200, 409); // 409: still running past the wait; the sender redelivers
    }
    assertThat(svixDelivery(id, body, t).statusCode()).isEqualTo(200);
    assertThat(effects("svix", id)).isEqualTo(1);
    assertThat(inboxRows("svix", id)).isEqualTo(1);
  }

  @Test
  void aBadSignatureIsRefused401WithNothingWritten() throws Exception {
    String id = HttpFixture.unique("evt");
    HttpResponse<String> r = stripeDelivery(stripeEvent(id, "charge.refunded"), now(), "whsec_another_secret");

    assertThat(r.statusCode()).isEqualTo(401);
    assertThat(r.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(json(r).get("type").asText()).isEqualTo("https://idem.dev/problems/webhook-signature-invalid");
    assertThat(r.body()).doesNotContain(STRIPE_SECRET);
    assertThat(effects("stripe", id)).isZero();
    assertThat(inboxRows("stripe", id)).isZero();
  }

  @Test
  void aBodyChangedAfterSigningIsRefused() throws Exception {
    String id = HttpFixture.unique("msg");
    long t = now();
    byte[] key = Base64.getDecoder().decode(SVIX_SECRET.substring("whsec_".length()));
    String signature = "v1," + hmacBase64(key, id + "." + t + ".{\"amount\":100}");
    HttpResponse<String> r = send(svix, "{\"amount\":999}", "svix-id", id, "svix-timestamp", Long.toString(t), "svix-signature", signature);

    assertThat(r.statusCode()).isEqualTo(401);
    assertThat(effects("svix", id)).isZero();
    assertThat(inboxRows("svix", id)).isZero();
  }

  @Test
  void aMissingSignatureIs400WithNothingWritten() throws Exception {
    String id = HttpFixture.unique("evt");
    HttpResponse<String> r = send(stripe, stripeEvent(id, "charge.refunded"));

    assertThat(r.statusCode()).isEqualTo(400);
    assertThat(json(r).get("type").asText()).isEqualTo("https://idem.dev/problems/webhook-signature-malformed");
    assertThat(effects("stripe", id)).isZero();
    assertThat(inboxRows("stripe", id)).isZero();
  }

  @Test
  void aStaleTimestampIsRefusedWithNothingWritten() throws Exception {
    String id = HttpFixture.unique("evt");
    String body = stripeEvent(id, "charge.refunded");
    HttpResponse<String> stale = stripeDelivery(body, now() - Duration.ofMinutes(10).toSeconds(), STRIPE_SECRET);
    HttpResponse<String> ahead = stripeDelivery(body, now() + Duration.ofMinutes(10).toSeconds(), STRIPE_SECRET);

    assertThat(stale.statusCode()).isEqualTo(401);
    assertThat(json(stale).get("type").asText()).isEqualTo("https://idem.dev/problems/webhook-timestamp-outside-tolerance");
    assertThat(ahead.statusCode()).isEqualTo(401);
    assertThat(effects("stripe", id)).isZero();
    assertThat(inboxRows("stripe", id)).isZero();
    // signed anew, the same event is taken
    assertThat(stripeDelivery(body, now(), STRIPE_SECRET).statusCode()).isEqualTo(200);
    assertThat(effects("stripe", id)).isEqualTo(1);
  }

  @Test
  void aHandlerThatFailsLeavesNothingAndTheRedeliveryApplies() throws Exception {
    String id = HttpFixture.unique("evt");
    HttpResponse<String> failed = stripeDelivery(stripeEvent(id, "fail"), now(), STRIPE_SECRET);

    assertThat(failed.statusCode()).isEqualTo(500);
    assertThat(effects("stripe", id)).isZero();
    assertThat(inboxRows("stripe", id)).isZero();
    assertThat(stripeDelivery(stripeEvent(id, "ok"), now(), STRIPE_SECRET).statusCode()).isEqualTo(200);
    assertThat(effects("stripe", id)).isEqualTo(1);
    assertThat(inboxRows("stripe", id)).isEqualTo(1);
  }

  @Test
  void theSvixSchemeMatchesSvixsOwnExample() {
    // The example of Svix's documentation (and its libraries' tests).
    WebhookSignature s = WebhookSignature.svix("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
    WebhookDelivery d = WebhookDelivery.of(Map.of(
        "svix-id", List.of("msg_p5jXN8AQM9LWM0D4loKWxJek"),
        "svix-timestamp", List.of("1614265330"),
        "svix-signature", List.of("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")),
        "{\"test\": 2432232314}".getBytes(StandardCharsets.UTF_8));

    assertThat(s.verify(d)).isEqualTo(Instant.ofEpochSecond(1614265330));
    assertThat(s.eventId(d)).isEqualTo("msg_p5jXN8AQM9LWM0D4loKWxJek");
    assertThatThrownBy(() -> WebhookSignature.svix("whsec_not base64!")).isInstanceOf(IllegalArgumentException.class);
  }
}
