package dev.idem.spring;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import java.util.List;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Delivers the events that report a write ({@code Applied}, {@code Transition}) made inside a
 * Spring transaction after it commits, and never for a rollback, so a metric counts only effects
 * that exist. Every other event (a replay, an in-flight answer, a refused key or fence, a lease
 * taken over, an expiry, the relay's publishes, an operator's action) reports what happened whatever the transaction does, and goes at once.
 *
 * <p>Delivers each event to every listener given, in order; one that throws is logged and does not
 * keep the event from the others, nor fail the call or the commit.
 */
public final class AfterCommitListener implements IdemListener {
  private static final Logger LOG = LoggerFactory.getLogger(AfterCommitListener.class);
  private final List<IdemListener> listeners;

  /** Delivers to {@code listeners}, in their order. */
  public AfterCommitListener(List<? extends IdemListener> listeners) {
    if (listeners == null || listeners.contains(null)) {
      throw new IllegalArgumentException("listeners must not be null nor hold a null");
    }
    this.listeners = List.copyOf(listeners);
  }

  private <E> void now(E event, BiConsumer<IdemListener, E> deliver) {
    for (IdemListener l : listeners) {
      try {
        deliver.accept(l, event);
      } catch (RuntimeException e) {
        LOG.warn("idem listener {} failed on {}", l, event, e);
      }
    }
  }

  private <E> void afterCommit(E event, BiConsumer<IdemListener, E> deliver) {
    if (!TransactionSynchronizationManager.isActualTransactionActive()
        || !TransactionSynchronizationManager.isSynchronizationActive()) {
      now(event, deliver); // idem's own transaction: idem delivers after its commit already
      return;
    }
    TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
      @Override
      public void afterCommit() {
        now(event, deliver);
      }
    });
  }

  @Override
  public void onApplied(IdemEvent.Applied event) {
    afterCommit(event, IdemListener::onApplied);
  }

  @Override
  public void onTransition(IdemEvent.Transition event) {
    afterCommit(event, IdemListener::onTransition);
  }

  @Override
  public void onReplayed(IdemEvent.Replayed event) {
    now(event, IdemListener::onReplayed);
  }

  @Override
  public void onInFlight(IdemEvent.InFlight event) {
    now(event, IdemListener::onInFlight);
  }

  @Override
  public void onFingerprintMismatch(IdemEvent.FingerprintMismatch event) {
    now(event, IdemListener::onFingerprintMismatch);
  }

  @Override
  public void onLeaseTakenOver(IdemEvent.LeaseTakenOver event) {
    now(event, IdemListener::onLeaseTakenOver);
  }

  @Override
  public void onExpired(IdemEvent.Expired event) {
    now(event, IdemListener::onExpired);
  }

  @Override
  public void onStaleFence(IdemEvent.StaleFence event) {
    now(event, IdemListener::onStaleFence);
  }

  @Override
  public void onSequenceIgnored(IdemEvent.SequenceIgnored event) {
    now(event, IdemListener::onSequenceIgnored);
  }

  @Override
  public void onPublished(IdemEvent.Published event) {
    now(event, IdemListener::onPublished);
  }

  @Override
  public void onPublishFailed(IdemEvent.PublishFailed event) {
    now(event, IdemListener::onPublishFailed);
  }

  @Override
  public void onOperatorAction(IdemEvent.OperatorAction event) {
    now(event, IdemListener::onOperatorAction);
  }
}
