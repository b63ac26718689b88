package dev.idem.jdbc.internal;

import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.tx.TxCallback;
import java.util.ArrayList;

/**
 * The intent whose effect runs on this thread right now, per {@link Context} (one per Idem): the
 * key of an executor's local effect, or the intent a message received through an inbox carried.
 * An outbox message enqueued inside that effect carries it (the {@code idem-intent} header), so
 * the intent follows its messages from hop to hop. Usually one entry or none, so a list. Not an API.
 */
public final class Lineage {
  /** The header that carries a message's intent key, in the outbox, Kafka and the Debezium layout. */
  public static final String HEADER = "idem-intent";

  /**
   * The longest intent accepted, in characters: an {@code IdempotencyKey}'s scope and value (255
   * each) joined by ':'; MariaDB's column holds 512.
   */
  public static final int MAX_LENGTH = 511;

  /** {@code intent}: a String, or an {@code IdempotencyKey} made text only when asked (an effect rarely enqueues). */
  private record Running(Context idem, Object intent) {}

  private static final ThreadLocal<ArrayList<Running>> RUNNING = ThreadLocal.withInitial(ArrayList::new);

  private Lineage() {}

  /**
   * Runs {@code effect} with {@code intent} (null: unknown) as this thread's intent for {@code
   * idem}: a String, or an object whose {@code toString()} is the intent (an {@code IdempotencyKey}).
   */
  public static <T, X extends Exception> T run(Context idem, Object intent, TxCallback<T, X> effect, Tx tx) throws X {
    ArrayList<Running> running = RUNNING.get();
    running.add(new Running(idem, intent));
    try {
      return effect.apply(tx);
    } finally {
      running.remove(running.size() - 1);
    }
  }

  /**
   * The intent of the innermost effect of {@code idem} running on this thread, or null (none runs,
   * or it received a message that carried no intent: an unknown intent is never replaced by an
   * outer one).
   */
  public static String current(Context idem) {
    ArrayList<Running> running = RUNNING.get();
    for (int i = running.size() - 1; i >= 0; i--) {
      Running r = running.get(i);
      if (r.idem() == idem) {
        return r.intent() == null ? null : r.intent().toString();
      }
    }
    return null;
  }

  /**
   * {@code intent} if it is null or a storable intent key: 1 to {@value #MAX_LENGTH} visible ASCII
   * characters ('!' to '~'), as an {@code IdempotencyKey}'s text is.
   *
   * @throws IllegalArgumentException naming {@code what} and what is wrong
   */
  public static String check(String what, String intent) {
    if (intent == null) {
      return null;
    }
    if (intent.isEmpty() || intent.length() > MAX_LENGTH) {
      throw new IllegalArgumentException(what + " must be 1 to " + MAX_LENGTH + " characters, was " + intent.length());
    }
    for (int i = 0; i < intent.length(); i++) {
      char c = intent.charAt(i);
      if (c < '!' || c > '~') {
        throw new IllegalArgumentException(what + " has " + String.format("U+%04X", (int) c) + " at index " + i
            + "; only visible ASCII ('!' to '~') is allowed, as in an idempotency key");
      }
    }
    return intent;
  }
}
