package dev.idem.http.client;

import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;

/** What every {@link IntentKeys} shares: the rules for an intent, and how a key is minted. */
final class Intents {
  /** An intent is at most as long as a key (idem_intent_keys.intent on MariaDB holds no more). */
  static final int MAX_LENGTH = 255;

  private Intents() {}

  static String check(String intent) {
    if (intent == null) {
      throw new IllegalArgumentException("intent must not be null: name the thing to do once, e.g. \"order-o1/payment\"");
    }
    if (intent.isBlank()) {
      throw new IllegalArgumentException("intent must not be empty or blank: name the thing to do once, e.g. \"order-o1/payment\"");
    }
    if (intent.length() > MAX_LENGTH) {
      throw new IllegalArgumentException("intent is " + intent.length() + " characters long; at most " + MAX_LENGTH + " are allowed");
    }
    for (int i = 0; i < intent.length(); i++) {
      if (Character.isISOControl(intent.charAt(i))) {
        throw new IllegalArgumentException("intent has a control character at " + i + ": " + CallPolicy.quoted(intent));
      }
    }
    return intent;
  }

  /**
   * A new key: a UUIDv7 (48 bits of Unix milliseconds, then random bits), so a server whose key
   * table is partitioned by the key's day (docs/scale.md) accepts it.
   */
  static String mint() {
    ThreadLocalRandom random = ThreadLocalRandom.current();
    long msb = (System.currentTimeMillis() << 16) | 0x7000L | (random.nextLong() & 0x0FFFL);
    long lsb = (random.nextLong() & 0x3FFFFFFFFFFFFFFFL) | 0x8000000000000000L;
    return new UUID(msb, lsb).toString();
  }
}
