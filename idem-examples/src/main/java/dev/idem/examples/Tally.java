package dev.idem.examples;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * What happened on the way, for the report: the faults that fired (each at most once per run, see
 * {@link #fire}), the repeats each guard caught, and a trace of both in order. Thread-safe.
 */
final class Tally {
  private final Setup setup;
  private final Map<Hop, AtomicBoolean> armed = new EnumMap<>(Hop.class);
  private final Map<Hop, Integer> caught = new EnumMap<>(Hop.class);
  private final Map<Hop, Integer> fired = new EnumMap<>(Hop.class);
  private final List<String> trace = new ArrayList<>();

  Tally(Setup setup) {
    this.setup = setup;
    for (Hop hop : Hop.values()) {
      armed.put(hop, new AtomicBoolean(setup.broken(hop)));
    }
  }

  Setup setup() {
    return setup;
  }

  /** True once, the first time it is asked, if {@code hop} is broken: the fault fires now. */
  boolean fire(Hop hop, String what) {
    if (!armed.get(hop).compareAndSet(true, false)) {
      return false;
    }
    synchronized (this) {
      fired.merge(hop, 1, Integer::sum);
      trace.add("fault  " + pad(hop) + what);
    }
    return true;
  }

  /** A guard recognised a repeat. */
  synchronized void caught(Hop hop, String what) {
    caught.merge(hop, 1, Integer::sum);
    trace.add("guard  " + pad(hop) + what);
  }

  /** Something worth seeing in the trace that is neither. */
  synchronized void note(Hop hop, String what) {
    trace.add("       " + pad(hop) + what);
  }

  synchronized int caught(Hop hop) {
    return caught.getOrDefault(hop, 0);
  }

  synchronized int fired(Hop hop) {
    return fired.getOrDefault(hop, 0);
  }

  synchronized Map<Hop, Integer> caughtByHop() {
    return new EnumMap<>(caught);
  }

  synchronized Map<Hop, Integer> firedByHop() {
    return new EnumMap<>(fired);
  }

  synchronized List<String> trace() {
    return List.copyOf(trace);
  }

  private static String pad(Hop hop) {
    return String.format("%-9s ", hop.cliName());
  }
}
