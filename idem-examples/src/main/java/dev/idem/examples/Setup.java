package dev.idem.examples;

import java.util.Collections;
import java.util.EnumSet;
import java.util.Set;

/**
 * Which hops are broken and which are guarded, for one run of the lab. Each fault fires once per
 * run, the first time its hop is crossed, so every count is deterministic.
 *
 * @param faults the hops that repeat what they received (once)
 * @param guards the hops that recognise a repeat
 */
public record Setup(Set<Hop> faults, Set<Hop> guards) {

  public Setup {
    if (faults == null || guards == null) {
      throw new IllegalArgumentException("faults and guards must not be null (use an empty set)");
    }
    faults = Collections.unmodifiableSet(faults.isEmpty() ? EnumSet.noneOf(Hop.class) : EnumSet.copyOf(faults));
    guards = Collections.unmodifiableSet(guards.isEmpty() ? EnumSet.noneOf(Hop.class) : EnumSet.copyOf(guards));
  }

  /** Parses the command line's spelling, e.g. {@code of("lost-reply,lb-retry", "all")}. */
  public static Setup of(String faults, String guards) {
    return new Setup(Hop.parseList("--faults", faults, true), Hop.parseList("--guards", guards, false));
  }

  public boolean broken(Hop hop) {
    return faults.contains(hop);
  }

  public boolean guarded(Hop hop) {
    return guards.contains(hop);
  }

  @Override
  public String toString() {
    return "faults=" + Hop.format(faults, true) + " guards=" + Hop.format(guards, false);
  }
}
