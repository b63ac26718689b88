package dev.idem.testing;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.key.IdempotencyKey;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * An {@link IdemListener} that keeps every event it receives, in order, from any number of
 * threads: how tests check what a guard reported beside what the database holds. It overrides
 * every method of {@link IdemListener} (a test of idem-testing checks that none is left out).
 */
public final class RecordingListener implements IdemListener {
  private final List<IdemEvent> events = new CopyOnWriteArrayList<>();

  /** Every event received so far, in order (a live, thread-safe view). */
  public List<IdemEvent> all() {
    return events;
  }

  /** The events of {@code type} received so far, in order. */
  public <E extends IdemEvent> List<E> of(Class<E> type) {
    return events.stream().filter(type::isInstance).map(type::cast).toList();
  }

  /** The events of {@code type} about {@code key}, in order; events that name no key never match. */
  public <E extends IdemEvent> List<E> of(Class<E> type, IdempotencyKey key) {
    return of(type).stream().filter(e -> key.equals(keyOf(e))).toList();
  }

  /** Forgets every event received so far. */
  public void clear() {
    events.clear();
  }

  private static IdempotencyKey keyOf(IdemEvent e) {
    if (e instanceof IdemEvent.Applied a) {
      return a.key();
    } else if (e instanceof IdemEvent.Replayed r) {
      return r.key();
    } else if (e instanceof IdemEvent.InFlight i) {
      return i.key();
    } else if (e instanceof IdemEvent.FingerprintMismatch m) {
      return m.key();
    } else if (e instanceof IdemEvent.LeaseTakenOver l) {
      return l.key();
    } else if (e instanceof IdemEvent.SequenceIgnored s) {
      return s.key();
    }
    return null;
  }

  @Override
  public void onApplied(IdemEvent.Applied event) {
    events.add(event);
  }

  @Override
  public void onReplayed(IdemEvent.Replayed event) {
    events.add(event);
  }

  @Override
  public void onInFlight(IdemEvent.InFlight event) {
    events.add(event);
  }

  @Override
  public void onFingerprintMismatch(IdemEvent.FingerprintMismatch event) {
    events.add(event);
  }

  @Override
  public void onLeaseTakenOver(IdemEvent.LeaseTakenOver event) {
    events.add(event);
  }

  @Override
  public void onExpired(IdemEvent.Expired event) {
    events.add(event);
  }

  @Override
  public void onTransition(IdemEvent.Transition event) {
    events.add(event);
  }

  @Override
  public void onStaleFence(IdemEvent.StaleFence event) {
    events.add(event);
  }

  @Override
  public void onSequenceIgnored(IdemEvent.SequenceIgnored event) {
    events.add(event);
  }

  @Override
  public void onPublished(IdemEvent.Published event) {
    events.add(event);
  }

  @Override
  public void onPublishFailed(IdemEvent.PublishFailed event) {
    events.add(event);
  }

  @Override
  public void onOperatorAction(IdemEvent.OperatorAction event) {
    events.add(event);
  }
}
