package dev.idem.jdbc.internal.claim;

import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import java.util.HexFormat;
import java.util.function.Function;

/** The values one call binds to the executor's named parameters. */
public final class Binds implements Function<String, Object> {
  private static final char[] DIGITS = "0123456789abcdef".toCharArray();
  final IdempotencyKey key;
  /** Null for a guard that keeps no fingerprint (the inbox). */
  final Fingerprint fingerprint;
  private byte[] parsedFingerprint;
  public String callKey;
  byte[] result;
  long fence;
  /** When ({@link System#nanoTime}) the external claim this call holds was asked for: its lease ends no sooner than that plus the lease. */
  long claimedAt;
  /** MariaDB, a claim in a transaction of idem's own: the time its row was stamped with; else null. */
  java.time.Instant claimStamp;
  /** A sequence's number (sequences only). */
  long seq;
  /**
   * The completed row a call in a transaction of its own applied (as a repeat would read it) or
   * answered from, once that transaction ended; else null.
   */
  ClaimRow answered;
  /** When ({@link System#nanoTime}) {@link #answered} was as old as it says: its claim, or the statement that read it. */
  long answeredAt;

  public Binds(IdempotencyKey key, Fingerprint fingerprint) {
    this.key = key;
    this.fingerprint = fingerprint;
  }

  /**
   * How many bytes of the fingerprint's SHA-256 the key table keeps: the first 16 (128 bits tell
   * two requests apart as surely as 256 do, for a guard against a client reusing its own key; 16
   * bytes less per key).
   */
  static final int STORED_FINGERPRINT_BYTES = 16;

  /** The fingerprint's first 16 bytes, parsed from its hex only when a statement sends them. */
  byte[] fingerprintBytes() {
    if (parsedFingerprint == null) {
      parsedFingerprint = HexFormat.of().parseHex(fingerprint.hex(), 0, 2 * STORED_FINGERPRINT_BYTES);
    }
    return parsedFingerprint;
  }

  /**
   * Whether a stored fingerprint is this call's, compared without parsing (a replay never sends
   * it): each stored byte against its two hex digits, which {@link Fingerprint} keeps lower-case.
   */
  public boolean sameFingerprint(byte[] stored) {
    String hex = fingerprint.hex();
    if (stored == null || stored.length != STORED_FINGERPRINT_BYTES || stored.length * 2 > hex.length()) {
      return false;
    }
    for (int i = 0; i < stored.length; i++) {
      int b = stored[i] & 0xff;
      if (hex.charAt(2 * i) != DIGITS[b >>> 4] || hex.charAt(2 * i + 1) != DIGITS[b & 0xf]) {
        return false;
      }
    }
    return true;
  }

  void answered(ClaimRow row, long at) {
    this.answered = row;
    this.answeredAt = at;
  }

  public IdempotencyKey key() {
    return key;
  }

  public Binds fence(long fence) {
    this.fence = fence;
    return this;
  }

  public Binds seq(long seq) {
    this.seq = seq;
    return this;
  }

  public Binds result(byte[] result) {
    this.result = result;
    return this;
  }

  @Override
  public Object apply(String name) {
    return switch (name) {
      case "scope" -> key.scope();
      case "key" -> key.value();
      case "fingerprint" -> fingerprint == null ? null : fingerprintBytes();
      case "call_key" -> callKey;
      case "result" -> result;
      case "fence" -> fence;
      case "seq" -> seq;
      case "stamp" -> claimStamp == null ? null : dev.idem.jdbc.internal.DbTime.utc(claimStamp);
      default -> throw new IllegalStateException("no value for parameter " + name);
    };
  }
}
