package dev.idem.jdbc.internal.claim;

import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.tx.TxCallback;
import dev.idem.key.IdempotencyKey;
import java.util.ArrayList;

/**
 * The keys whose effects run on this thread right now, per {@link Context} (one per Idem) and claim
 * table (an inbox's consumer may share a name with an executor's scope), so that an effect
 * calling the guard again with its own key is refused instead of answered. Its key's row is
 * its own transaction's, uncommitted and without a result yet: a nested call would "replay" a
 * result that does not exist, or, on another connection, wait on its own transaction's row.
 * Usually one entry or none, so a list.
 */
public final class RunningKeys {
  /**
   * Per {@link Context} (one per Idem), which has identity equality: two of them may name the same schema in
   * different databases.
   */
  private record Running(Context idem, ClaimTable.Layout table, IdempotencyKey key) {}

  private static final ThreadLocal<ArrayList<Running>> RUNNING = ThreadLocal.withInitial(ArrayList::new);

  private RunningKeys() {}

  /** Runs {@code effect} with {@code key} marked as running on this thread. */
  public static <T, X extends Exception> T run(Context idem, ClaimTable.Layout table, IdempotencyKey key,
      TxCallback<T, X> effect, Tx tx) throws X {
    ArrayList<Running> running = RUNNING.get();
    running.add(new Running(idem, table, key));
    try {
      return effect.apply(tx);
    } finally {
      running.remove(running.size() - 1);
    }
  }

  /** @throws IllegalStateException if an effect of {@code key} is running on this thread */
  public static void refuseNested(Context idem, ClaimTable.Layout table, IdempotencyKey key) {
    ArrayList<Running> running = RUNNING.get();
    if (!running.isEmpty() && running.contains(new Running(idem, table, key))) {
      throw new IllegalStateException("the effect of key " + key + " called the guard again with its own key;"
          + " a nested call cannot be answered (the key's row is this transaction's, with no result yet):"
          + " use another key, e.g. Keys.child(key, \"step\"), for the inner call");
    }
  }
}
