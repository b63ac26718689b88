package dev.idem.examples;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;

/**
 * Hands every event to two listeners: an {@code Idem} takes one listener, and the lab attaches
 * both its {@link LabListener} and idem-micrometer's {@code IdemMetrics}. Neither throws, so the
 * second never misses an event because of the first.
 */
record BothListeners(IdemListener first, IdemListener second) implements IdemListener {

  @Override
  public void onApplied(IdemEvent.Applied e) {
    first.onApplied(e);
    second.onApplied(e);
  }

  @Override
  public void onReplayed(IdemEvent.Replayed e) {
    first.onReplayed(e);
    second.onReplayed(e);
  }

  @Override
  public void onInFlight(IdemEvent.InFlight e) {
    first.onInFlight(e);
    second.onInFlight(e);
  }

  @Override
  public void onFingerprintMismatch(IdemEvent.FingerprintMismatch e) {
    first.onFingerprintMismatch(e);
    second.onFingerprintMismatch(e);
  }

  @Override
  public void onLeaseTakenOver(IdemEvent.LeaseTakenOver e) {
    first.onLeaseTakenOver(e);
    second.onLeaseTakenOver(e);
  }

  @Override
  public void onExpired(IdemEvent.Expired e) {
    first.onExpired(e);
    second.onExpired(e);
  }

  @Override
  public void onTransition(IdemEvent.Transition e) {
    first.onTransition(e);
    second.onTransition(e);
  }

  @Override
  public void onStaleFence(IdemEvent.StaleFence e) {
    first.onStaleFence(e);
    second.onStaleFence(e);
  }

  @Override
  public void onSequenceIgnored(IdemEvent.SequenceIgnored e) {
    first.onSequenceIgnored(e);
    second.onSequenceIgnored(e);
  }

  @Override
  public void onPublished(IdemEvent.Published e) {
    first.onPublished(e);
    second.onPublished(e);
  }

  @Override
  public void onPublishFailed(IdemEvent.PublishFailed e) {
    first.onPublishFailed(e);
    second.onPublishFailed(e);
  }

  @Override
  public void onOperatorAction(IdemEvent.OperatorAction e) {
    first.onOperatorAction(e);
    second.onOperatorAction(e);
  }
}
