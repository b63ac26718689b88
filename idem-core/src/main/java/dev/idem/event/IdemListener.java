package dev.idem.event;

/**
 * Receives {@link IdemEvent}s. Implement only the methods you need.
 *
 * <p>Guarantees: a listener's exception never breaks the call that emitted the event; idem logs it
 * and goes on. Events are delivered on the calling thread, after the outcome is decided: after
 * commit when the tool owns its transaction; when it joined the caller's transaction (and
 * transitions always do), once the outcome is recorded there, so an {@code Applied} or an APPLIED
 * {@code Transition} counts only if the caller then commits.
 *
 * <p>Does not guarantee: delivery after a crash. Events are for metrics, not for bookkeeping; count
 * effects in the database when you need certainty.
 */
public interface IdemListener {

  /** Listens to nothing. Guards given this one build no events at all. */
  IdemListener NONE = new IdemListener() {};

  /** An effect ran and was recorded with its key (committed, or recorded in the caller's transaction). */
  default void onApplied(IdemEvent.Applied event) {}

  /** A repeat was recognised and answered with the first outcome; its effect did not run. */
  default void onReplayed(IdemEvent.Replayed event) {}

  /** A copy found the first still running and was told to retry later. */
  default void onInFlight(IdemEvent.InFlight event) {}

  /** A key came back with a different request and was refused. */
  default void onFingerprintMismatch(IdemEvent.FingerprintMismatch event) {}

  /** An ended lease was granted again with a higher fencing token. */
  default void onLeaseTakenOver(IdemEvent.LeaseTakenOver event) {}

  /** Records past their window were deleted. */
  default void onExpired(IdemEvent.Expired event) {}

  /** A conditional write on a row of your table returned an outcome (applied, already done, conflict). */
  default void onTransition(IdemEvent.Transition event) {}

  /** A write with a stale fencing token was refused. */
  default void onStaleFence(IdemEvent.StaleFence event) {}

  /** A per-entity sequence ignored an event whose number was not newer. */
  default void onSequenceIgnored(IdemEvent.SequenceIgnored event) {}

  /** The relay published an outbox message. */
  default void onPublished(IdemEvent.Published event) {}

  /** A publish of an outbox message failed (and may have parked it). */
  default void onPublishFailed(IdemEvent.PublishFailed event) {}

  /** An operator resolved, released or redrove something through {@code Operations}. */
  default void onOperatorAction(IdemEvent.OperatorAction event) {}
}
