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

  default void onApplied(IdemEvent.Applied event) {}

  default void onReplayed(IdemEvent.Replayed event) {}

  default void onInFlight(IdemEvent.InFlight event) {}

  default void onFingerprintMismatch(IdemEvent.FingerprintMismatch event) {}

  default void onLeaseTakenOver(IdemEvent.LeaseTakenOver event) {}

  default void onExpired(IdemEvent.Expired event) {}

  /** A conditional write on a row of your table returned an outcome (applied, already done, conflict). */
  default void onTransition(IdemEvent.Transition event) {}

  /** A write with a stale fencing token was refused. */
  default void onStaleFence(IdemEvent.StaleFence event) {}

  /** A per-entity sequence ignored an event whose number was not newer. */
  default void onSequenceIgnored(IdemEvent.SequenceIgnored event) {}
}
