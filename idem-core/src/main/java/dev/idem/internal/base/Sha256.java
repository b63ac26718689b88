package dev.idem.internal.base;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/** SHA-256 in lower-case hex. Not an API. */
public final class Sha256 {
  private Sha256() {}

  public static String hex(byte[] bytes) {
    return HexFormat.of().formatHex(digest(bytes));
  }

  public static String hex(String text) {
    return hex(text.getBytes(StandardCharsets.UTF_8));
  }

  private static byte[] digest(byte[] bytes) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(bytes);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM ships SHA-256", e);
    }
  }
}
