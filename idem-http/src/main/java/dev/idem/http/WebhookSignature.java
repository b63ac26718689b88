package dev.idem.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.InvalidKeyException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.List;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * How a webhook sender signs its deliveries, and where it puts the event's id. {@link #stripe} and
 * {@link #svix} are HMAC-SHA256 in the shapes Stripe and Svix (and Standard Webhooks) use; implement
 * this interface for another sender. Implementations must be thread-safe and compare signatures in
 * constant time ({@link MessageDigest#isEqual}).
 *
 * <p>Guaranteed by the two built in: a delivery passes only if one of its signatures is the HMAC of
 * its exact body bytes (and timestamp, and id for Svix) under the secret; several signatures in one
 * header (a secret being rolled) pass if any matches. Not guaranteed: freshness. The timestamp they
 * return is the sender's clock; {@link WebhookReceiver} compares it with the database clock.
 */
public interface WebhookSignature {

  /**
   * Checks the delivery's signature.
   *
   * @return when the sender signed it, by the sender's clock, or null if the scheme signs no time
   *     (then no tolerance is checked)
   * @throws Refused if a signature header is missing or malformed, or no signature matches
   */
  Instant verify(WebhookDelivery delivery);

  /** The event's id, what the inbox claims: null or blank if the delivery carries none. */
  String eventId(WebhookDelivery delivery);

  /**
   * Stripe's scheme: {@code Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>} over {@code
   * "<t>.<body>"}, keyed by the endpoint's signing secret as it is shown ({@code whsec_...}, used as
   * its UTF-8 bytes); the event id is the JSON body's {@code "id"} ({@code evt_...}).
   *
   * @throws IllegalArgumentException if {@code secret} is null or blank
   */
  static WebhookSignature stripe(String secret) {
    return new Stripe(Hmac.key(nonBlank(secret).getBytes(StandardCharsets.UTF_8)));
  }

  /**
   * Svix's scheme (and Standard Webhooks', with {@code webhook-} in place of {@code svix-}):
   * {@code svix-id}, {@code svix-timestamp} (unix seconds) and {@code svix-signature: v1,<base64
   * HMAC-SHA256>} (several, space-separated) over {@code "<id>.<timestamp>.<body>"}, keyed by the
   * base64 after {@code whsec_} in the secret; the event id is {@code svix-id}.
   *
   * @throws IllegalArgumentException if {@code secret} is null, blank or not base64 after {@code whsec_}
   */
  static WebhookSignature svix(String secret) {
    String s = nonBlank(secret);
    String encoded = s.startsWith("whsec_") ? s.substring("whsec_".length()) : s;
    try {
      return new Svix(Hmac.key(Base64.getDecoder().decode(encoded)));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("a Svix secret is whsec_ and base64; this one is not base64 after whsec_");
    }
  }

  private static String nonBlank(String secret) {
    if (secret == null || secret.isBlank()) {
      throw new IllegalArgumentException("the webhook signing secret must not be null or blank");
    }
    return secret;
  }

  /**
   * A delivery whose signature does not pass: {@link #malformed()} when a signature header is
   * missing or cannot be read (answered 400), else no signature matched (401). Its message says
   * which, never the secret nor the expected signature.
   */
  final class Refused extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final boolean malformed;

    /** A refusal; {@code malformed}: a header is missing or unreadable, rather than a signature wrong. */
    public Refused(String message, boolean malformed) {
      super(message, null, false, false);
      this.malformed = malformed;
    }

    /** Whether a signature header was missing or unreadable (400), rather than not matching (401). */
    public boolean malformed() {
      return malformed;
    }
  }
}

/** HMAC-SHA256 with the JDK's provider. */
final class Hmac {
  private Hmac() {}

  static SecretKeySpec key(byte[] secret) {
    if (secret.length == 0) {
      throw new IllegalArgumentException("the webhook signing secret must not be empty");
    }
    return new SecretKeySpec(secret, "HmacSHA256");
  }

  static byte[] of(SecretKeySpec key, byte[]... parts) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(key);
      for (byte[] p : parts) {
        mac.update(p);
      }
      return mac.doFinal();
    } catch (NoSuchAlgorithmException | InvalidKeyException e) {
      throw new IllegalStateException("every JVM ships HmacSHA256", e);
    }
  }

  static long seconds(String text, String header) {
    try {
      return Long.parseLong(text.trim());
    } catch (NumberFormatException e) {
      throw new WebhookSignature.Refused(header + " has no timestamp in unix seconds", true);
    }
  }
}

/** {@link WebhookSignature#stripe}. */
record Stripe(SecretKeySpec key) implements WebhookSignature {
  private static final String HEADER = "Stripe-Signature";
  private static final ObjectMapper JSON = new ObjectMapper();

  @Override
  public Instant verify(WebhookDelivery delivery) {
    String header = delivery.header(HEADER);
    if (header == null || header.isBlank()) {
      throw new Refused(HEADER + " is missing", true);
    }
    String t = null;
    List<String> v1 = new ArrayList<>();
    for (String item : header.split(",")) {
      int eq = item.indexOf('=');
      if (eq < 0) {
        continue;
      }
      String name = item.substring(0, eq).trim();
      String value = item.substring(eq + 1).trim();
      if (name.equals("t") && t == null) {
        t = value;
      } else if (name.equals("v1")) {
        v1.add(value);
      }
    }
    if (t == null || v1.isEmpty()) {
      throw new Refused(HEADER + " must carry t=<timestamp> and at least one v1=<signature>", true);
    }
    long seconds = Hmac.seconds(t, HEADER);
    byte[] expected = Hmac.of(key, (t + ".").getBytes(StandardCharsets.UTF_8), delivery.bodyBytes());
    for (String candidate : v1) {
      byte[] sent;
      try {
        sent = HexFormat.of().parseHex(candidate);
      } catch (IllegalArgumentException notHex) {
        continue;
      }
      if (MessageDigest.isEqual(expected, sent)) {
        return Instant.ofEpochSecond(seconds);
      }
    }
    throw new Refused("no v1 signature in " + HEADER + " matches the body under this endpoint's secret", false);
  }

  @Override
  public String eventId(WebhookDelivery delivery) {
    try {
      JsonNode id = JSON.readTree(delivery.bodyBytes()).get("id");
      return id != null && id.isTextual() ? id.asText() : null;
    } catch (IOException | RuntimeException notJson) {
      return null;
    }
  }

  @Override
  public String toString() {
    return "WebhookSignature.stripe"; // never the secret
  }
}

/** {@link WebhookSignature#svix}. */
record Svix(SecretKeySpec key) implements WebhookSignature {
  @Override
  public Instant verify(WebhookDelivery delivery) {
    String prefix = delivery.header("svix-signature") != null ? "svix-" : "webhook-";
    String id = delivery.header(prefix + "id");
    String timestamp = delivery.header(prefix + "timestamp");
    String signatures = delivery.header(prefix + "signature");
    if (id == null || timestamp == null || signatures == null) {
      throw new Refused("svix-id, svix-timestamp and svix-signature (or webhook-id, webhook-timestamp and"
          + " webhook-signature) must all be sent", true);
    }
    long seconds = Hmac.seconds(timestamp, prefix + "timestamp");
    byte[] expected = Hmac.of(key, (id + "." + timestamp.trim() + ".").getBytes(StandardCharsets.UTF_8), delivery.bodyBytes());
    for (String item : signatures.trim().split(" +")) {
      int comma = item.indexOf(',');
      if (comma < 0 || !item.substring(0, comma).equals("v1")) {
        continue;
      }
      byte[] sent;
      try {
        sent = Base64.getDecoder().decode(item.substring(comma + 1));
      } catch (IllegalArgumentException notBase64) {
        continue;
      }
      if (MessageDigest.isEqual(expected, sent)) {
        return Instant.ofEpochSecond(seconds);
      }
    }
    throw new Refused("no v1 signature in " + prefix + "signature matches the body under this endpoint's secret", false);
  }

  @Override
  public String eventId(WebhookDelivery delivery) {
    String id = delivery.header("svix-id");
    return id != null ? id : delivery.header("webhook-id");
  }

  @Override
  public String toString() {
    return "WebhookSignature.svix"; // never the secret
  }
}
