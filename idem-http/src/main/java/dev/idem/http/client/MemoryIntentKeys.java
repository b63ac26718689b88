package dev.idem.http.client;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** {@link IntentKeys#inMemory()}. */
final class MemoryIntentKeys implements IntentKeys {
  private final Map<String, String> keys = new ConcurrentHashMap<>();

  @Override
  public String keyFor(String intent) {
    return keys.computeIfAbsent(Intents.check(intent), i -> Intents.mint());
  }

  @Override
  public void release(String intent) {
    keys.remove(Intents.check(intent));
  }

  @Override
  public String toString() {
    return "IntentKeys.inMemory[" + keys.size() + " intents]";
  }
}
