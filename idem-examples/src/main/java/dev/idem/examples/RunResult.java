package dev.idem.examples;

import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * What one run of the lab left behind, read from the database at the end: payment rows in the
 * service, card charges at the provider, receipt emails sent; plus which faults fired, which guard
 * caught how many repeats, idem's listener events, and the trace.
 */
public record RunResult(
    String scenario,
    Setup setup,
    int paymentRows,
    int charges,
    int receipts,
    Map<Hop, Integer> faultsFired,
    Map<Hop, Integer> caught,
    Map<String, Integer> listenerEvents,
    List<String> trace) {

  public RunResult {
    faultsFired = Map.copyOf(faultsFired);
    caught = Map.copyOf(caught);
    listenerEvents = Map.copyOf(listenerEvents);
    trace = List.copyOf(trace);
  }

  /** How many repeats the guard at {@code hop} recognised. */
  public int caught(Hop hop) {
    return caught.getOrDefault(hop, 0);
  }

  /** The line scripts read: {@code scenario=<name> payment_rows=<n> charges=<n> receipts=<n>}. */
  public String summaryLine() {
    return "scenario=" + scenario + " payment_rows=" + paymentRows + " charges=" + charges + " receipts=" + receipts;
  }

  /** {@code key-table=1 inbox=2}, in hop order, or {@code -}. */
  public String caughtText() {
    String text = java.util.Arrays.stream(Hop.values())
        .filter(h -> caught(h) > 0)
        .map(h -> h.guardName() + "=" + caught(h))
        .collect(Collectors.joining(" "));
    return text.isEmpty() ? "-" : text;
  }
}
