package dev.idem.examples;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import java.util.Map;
import java.util.TreeMap;

/**
 * Counts idem's events by kind and source ({@code replayed@...}), the way a metrics adapter would:
 * attached once to {@code Idem.builder(..).listener(..)}, never touching the tools themselves.
 */
final class LabListener implements IdemListener {
  private final Map<String, Integer> counts = new TreeMap<>();

  private synchronized void count(String kind, IdemEvent event) {
    counts.merge(kind + "@" + event.source(), 1, Integer::sum);
  }

  @Override
  public void onApplied(IdemEvent.Applied event) {
    count("applied", event);
  }

  @Override
  public void onReplayed(IdemEvent.Replayed event) {
    count("replayed", event);
  }

  @Override
  public void onInFlight(IdemEvent.InFlight event) {
    count("in-flight", event);
  }

  @Override
  public void onFingerprintMismatch(IdemEvent.FingerprintMismatch event) {
    count("fingerprint-mismatch", event);
  }

  @Override
  public void onLeaseTakenOver(IdemEvent.LeaseTakenOver event) {
    count("lease-taken-over", event);
  }

  @Override
  public void onExpired(IdemEvent.Expired event) {
    count("expired", event);
  }

  synchronized Map<String, Integer> snapshot() {
    return new TreeMap<>(counts);
  }
}
