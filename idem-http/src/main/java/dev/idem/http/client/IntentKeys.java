package dev.idem.http.client;

import dev.idem.jdbc.Idem;
import java.io.IOException;
import java.nio.file.Path;

/**
 * Where a client of a service's own API keeps the {@code Idempotency-Key} of each intent (a
 * checkout's payment, an export asked for once) from the moment it is minted until the intent is
 * done, so that every retry, in this process or in the next one after a crash or a deploy, sends
 * the same key. {@link OwnApiCalls} asks it for the key before the first send and releases it once
 * the intent has a definitive answer.
 *
 * <pre>{@code
 * IntentKeys keys = IntentKeys.database(idem);                   // or file(dir), inMemory()
 * }</pre>
 *
 * <p>What an implementation promises (the three here do):
 *
 * <ul>
 *   <li>{@link #keyFor} returns the key stored for the intent, or mints one, stores it durably and
 *       only then returns it: once it has returned, a process killed at any later point finds the
 *       same key for the intent;
 *   <li>callers asking for the same intent at once (threads, or processes sharing the store) all
 *       get the same key;
 *   <li>{@link #release} forgets the intent's key; the next {@code keyFor} of the intent mints a
 *       new one. Releasing an intent that has no key is a no-op.
 * </ul>
 *
 * <p>An intent is the caller's name for one thing it wants done once, e.g. {@code
 * "order-o1/payment"}: 1 to 255 characters, not blank, no control characters. Two intents never
 * share a key, so an intent must name the thing, not the attempt.
 *
 * <p>Implement it for another store (a cache with persistence, a device's storage): {@code keyFor}
 * must have stored the key durably before it returns.
 */
public interface IntentKeys {

  /**
   * The intent's key: the stored one, or a new one (a UUIDv7 here) stored durably before this
   * returns.
   *
   * @throws IllegalArgumentException if {@code intent} is null, blank, over 255 characters, or has
   *     control characters
   * @throws IOException if the store could not be read or written (nothing is sent then)
   */
  String keyFor(String intent) throws IOException;

  /**
   * Forgets the intent's key: the intent is done.
   *
   * @throws IllegalArgumentException for an intent {@link #keyFor} refuses
   * @throws IOException if the store could not be written (the key stays: a later send retries
   *     with it)
   */
  void release(String intent) throws IOException;

  /**
   * Keys in this process's memory only: they survive retries in this process, not a restart. For
   * tests, and for intents that die with the process anyway.
   */
  static IntentKeys inMemory() {
    return new MemoryIntentKeys();
  }

  /**
   * Keys in files under {@code directory} (created if missing), one file per intent, named by the
   * SHA-256 of the intent. A key is written to a temporary file, forced to the disk, then linked to
   * its name, which fails if another process got there first (whose key is then used), and the
   * directory is forced too: a process killed at any point leaves either no key or a whole one.
   *
   * @throws IllegalArgumentException if {@code directory} is null or is a file
   */
  static IntentKeys file(Path directory) {
    return new FileIntentKeys(directory);
  }

  /**
   * Keys in idem's table {@code idem_intent_keys} (migration V4, on PostgreSQL and MariaDB), in
   * {@code idem}'s schema, with the time each was minted by the database clock. A key is committed
   * before {@code keyFor} returns, unless a transaction is open on this thread ({@code
   * idem.inTransaction}, or a framework's through its binding): it then joins it and is stored
   * only when that transaction commits, so send outside transactions (a request sent from inside
   * one is a bad idea anyway: its key and its effect do not commit together).
   *
   * @throws IllegalArgumentException if {@code idem} is null
   */
  static IntentKeys database(Idem idem) {
    return new DatabaseIntentKeys(idem);
  }
}
