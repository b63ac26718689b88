package dev.idem.internal.base;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/** SHA-256 in lower-case hex. Not an API. */
public final class Sha256 {
  /** A digest never updated, only cloned. */
  private static final MessageDigest PROTOTYPE = lookUp();

  private Sha256() {}

  public static String hex(byte[] bytes) {
    return HexFormat.of().formatHex(digest(bytes));
  }

  public static String hex(String text) {
    return hex(text.getBytes(StandardCharsets.UTF_8));
  }

  private static byte[] digest(byte[] bytes) {
    return newDigest().digest(bytes);
  }

  /**
   * A fresh SHA-256 digest: a clone of one looked up once, which skips the provider look-up that
   * {@code getInstance} makes on every call (every fingerprint is one); by look-up if the provider's
   * digest cannot be cloned.
   */
  private static MessageDigest newDigest() {
    try {
      return (MessageDigest) PROTOTYPE.clone(); // never used itself, so always in its initial state
    } catch (CloneNotSupportedException e) {
      return lookUp();
    }
  }

  private static MessageDigest lookUp() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM ships SHA-256", e);
    }
  }
}
