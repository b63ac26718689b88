package dev.idem.event;

import dev.idem.key.IdempotencyKey;
import dev.idem.transition.Outcome;
import java.time.Duration;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.UUID;

/**
 * Something a guard did, for metrics and logs. Every event names the {@code source}, the tool and
 * hop it came from (e.g. {@code "executor"}, {@code "inbox:billing"}), so repeats can be counted
 * per hop, as the seed asks: a jump means something upstream started retrying.
 *
 * <p>Events are built only when a listener is registered. Each is delivered once per call that
 * decided it, after the decision; see {@link IdemListener} for what that means for commits.
 */
public sealed interface IdemEvent {

  /** The tool and hop that emitted the event. */
  String source();

  /**
   * The effect ran for {@code key} and was committed with its record: the executor's key, the
   * inbox's {@code (consumer, message id)}, a per-entity sequence's {@code (stream, entity)}.
   *
   * <p>When the tool joined the caller's transaction (a call given a {@code Connection} or {@code
   * Tx}, or one made inside {@code Idem.inTransaction}), "committed" reads "recorded in the caller's
   * transaction": it counts only if the caller commits, and nothing retracts the event if it rolls
   * back.
   */
  record Applied(String source, IdempotencyKey key) implements IdemEvent {}

  /**
   * A repeat of {@code key} was recognised and absorbed. {@code windowUsed} is its age over the
   * dedupe window: repeats near 1.0 predict repeats past the window.
   */
  record Replayed(String source, IdempotencyKey key, Duration age, double windowUsed) implements IdemEvent {}

  /** A copy of {@code key} found another copy running and was told to retry after {@code retryAfter}. */
  record InFlight(String source, IdempotencyKey key, Duration retryAfter) implements IdemEvent {}

  /** {@code key} came back with a different request and was refused. A rising rate means a client reuses keys. */
  record FingerprintMismatch(String source, IdempotencyKey key) implements IdemEvent {}

  /** A lease on {@code key} had ended and was taken over with a higher fencing token. */
  record LeaseTakenOver(String source, IdempotencyKey key, long previousToken, long newToken) implements IdemEvent {}

  /** {@code count} records past their window were deleted; a repeat of one of them would run again. */
  record Expired(String source, long count) implements IdemEvent {}

  /**
   * A conditional write on a row of the user's own table (idem-jdbc's {@code Transitions}: a state
   * step, a fenced step, an edit at a version, a fenced write) decided its outcome. One event per
   * call that returned an outcome, carrying that outcome and the row as the write left it
   * ({@link Outcome#APPLIED}) or as the read that classified zero rows found it.
   *
   * <p>{@link Outcome#ALREADY_DONE} is a repeat caught by the row's own state: a redelivery, a twin
   * worker that lost, a late copy of an old step. Count it with the other hops' replays. {@link
   * Outcome#CONFLICT} is the row somewhere the write does not lead: a side state such as {@code
   * CANCELLED}, a step that arrived before the one it follows, no row at all, or (for an edit) a
   * version that moved on. A step's conflict is the one an operator must see; an edit's is an
   * ordinary lost race between editors ({@code to()} is empty for edits, so the two can be told
   * apart).
   *
   * <p>Guarantees: {@code outcome} is what the call returned; the event is delivered after the
   * outcome was decided, on the calling thread, before the call returns. Building it cannot fail the
   * call, whatever the id holds.
   *
   * <p>Does not guarantee that the write is committed. Transitions run in the caller's transaction
   * and never commit it, so {@link Outcome#APPLIED} here means "written in the caller's
   * transaction": it counts only if that commits, and a transaction rolled back, or run again by
   * {@code Idem.inTransaction} after a serialization failure, has emitted its events anyway. Count
   * committed changes in the table (its version column) when you need certainty. A call that threw
   * (bad arguments, an SQL error, an id matching several rows) emits nothing; a stale fencing token
   * emits {@link StaleFence} instead.
   *
   * @param source {@code "transitions:<table>"}
   * @param table the table as configured, e.g. {@code "shop.orders"}
   * @param id the row's id as text ({@code String.valueOf} of the id passed): any content, never
   *     validated or shortened, so treat it as data, not as a metric label
   * @param from the state the step starts from; empty for an edit ({@code updateAtVersion}, {@code
   *     writeFenced}), which is not a state step
   * @param to the state the step leads to; empty for an edit
   * @param outcome what the call returned
   * @param rowFound whether a row with the id exists (false only with {@link Outcome#CONFLICT})
   * @param state the row's status after the write or as read; empty with no row or a SQL NULL status
   * @param version the row's version after the write or as read; empty with no row, a SQL NULL
   *     version, or no version column configured
   */
  record Transition(String source, String table, String id, Optional<String> from, Optional<String> to,
      Outcome outcome, boolean rowFound, Optional<String> state, OptionalLong version) implements IdemEvent {}

  /**
   * A write carrying fencing token {@code token} was refused because {@code resource} had already
   * seen {@code highest}: the writer's lease ended and a later holder wrote. Nothing was written,
   * and the call throws {@code StaleFenceException} right after this event. A rising rate means
   * workers outlive their leases (pauses, slow calls): lengthen the lease or renew it sooner.
   *
   * <p>Guarantees: emitted only for a refusal the store decided (the write matched nothing and
   * the row carries a higher token). Does not guarantee that the stale writer stops; the exception
   * tells it to.
   *
   * @param source the tool and hop, e.g. {@code "transitions:runs"}
   * @param resource what was written, as the exception names it ({@code "<table>/<id>"} for a row
   *     of the user's table)
   * @param token the refused token
   * @param highest the highest token the resource has seen, greater than {@code token}
   */
  record StaleFence(String source, String resource, long token, long highest) implements IdemEvent {}

  /**
   * An event numbered {@code seq} for an entity was not newer than the highest number applied for
   * it, and was ignored: its effect did not run. It was a repeat, or a late event that a newer one
   * had already superseded; either way a repeat caught by one number per entity, with no dedupe
   * window (so, unlike {@link Replayed}, no age). Its counterpart when the number was newer is
   * {@link Applied}, with the same key.
   *
   * <p>Guarantees: the effect did not run in this call. Delivered after the outcome was decided:
   * after the transaction ended when the tool owned it, else once decided in the caller's
   * transaction. Does not say which of the two it was, nor how far behind the number is: read
   * {@code lastApplied(entity)} for that.
   *
   * @param source {@code "sequences:<stream>"}
   * @param key the stream (scope) and the entity (value)
   * @param seq the ignored event's number
   */
  record SequenceIgnored(String source, IdempotencyKey key, long seq) implements IdemEvent {}

  /**
   * The relay handed an outbox message to the publisher, which returned: it is marked sent in the
   * same transaction. Delivered after that transaction commits (a batch that failed to commit
   * publishes its messages again, and they are reported again).
   *
   * @param source {@code "outbox"}
   * @param id the message id
   * @param topic the message's topic
   * @param attempt 1 for the first publish of the message, more after failures
   * @param publishTime how long the publisher took, on this JVM's monotonic clock
   */
  record Published(String source, UUID id, String topic, int attempt, Duration publishTime) implements IdemEvent {}

  /**
   * A publish of an outbox message threw: it waits its back-off and is tried again, or, at the
   * relay's {@code maxAttempts}, is parked until an operator redrives it. Delivered after the batch
   * commits.
   *
   * @param source {@code "outbox"}
   * @param id the message id
   * @param topic the message's topic
   * @param attempt which attempt failed, from 1
   * @param parked whether this failure parked the message
   * @param error the publisher's exception, as text
   */
  record PublishFailed(String source, UUID id, String topic, int attempt, boolean parked, String error) implements IdemEvent {}

  /**
   * An operator changed idem's rows by hand through {@code Operations}: resolved or released a
   * stuck key, redrove parked messages. Also logged, at INFO.
   *
   * @param source {@code "operations"}
   * @param action what was done, e.g. {@code "resolve"}, {@code "release"}, {@code "redrive"}
   * @param target what it was done to, e.g. a key or a message id, or a topic
   * @param rows how many rows it changed
   */
  record OperatorAction(String source, String action, String target, long rows) implements IdemEvent {}
}
