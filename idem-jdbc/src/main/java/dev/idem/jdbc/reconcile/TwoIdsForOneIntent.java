package dev.idem.jdbc.reconcile;

import java.time.OffsetDateTime;
import java.util.List;

/**
 * One intent that arrived (or was enqueued) as more than one message: the seed's "two ids for one
 * intent", a duplicate born upstream, such as a republish that minted a new message id instead of
 * carrying the first one. Every hop after it sees two messages and deduplicates neither, so the
 * effect may have happened twice. Found by {@link IntentLineage#check}.
 *
 * @param hop where the ids were read: an inbox's rows ({@link Hop#INBOX}) or the outbox's ({@link Hop#OUTBOX})
 * @param at the inbox's consumer, or the outbox messages' topic
 * @param intent the intent key the messages carried ({@code "scope:value"})
 * @param messageIds the message ids, two or more, oldest first
 * @param first when the oldest was received (enqueued), database clock
 * @param last when the latest was, database clock
 */
public record TwoIdsForOneIntent(Hop hop, String at, String intent, List<String> messageIds, OffsetDateTime first,
    OffsetDateTime last) {

  /** Where the ids were read. */
  public enum Hop {
    /** {@code idem_inbox}: one consumer received the ids. */
    INBOX,
    /** {@code idem_outbox}: one topic was sent the ids (enqueued, in the polled layout). */
    OUTBOX
  }

  /** @throws IllegalArgumentException if a component is null or fewer than two ids are given */
  public TwoIdsForOneIntent {
    if (hop == null || at == null || intent == null || messageIds == null || first == null || last == null) {
      throw new IllegalArgumentException("hop, at, intent, messageIds, first and last must not be null");
    }
    messageIds = List.copyOf(messageIds);
    if (messageIds.size() < 2) {
      throw new IllegalArgumentException("two ids for one intent needs two ids or more, got " + messageIds);
    }
  }
}
