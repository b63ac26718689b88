package dev.idem.examples;

import java.util.Arrays;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.Collectors;

/**
 * The six hops a $40 payment crosses (the seed's "The problem it solves"). Each can repeat what it
 * received (its fault) and each has a guard that recognises a repeat arriving there. On the command
 * line a fault or a guard is named by its own name ({@code lost-reply}, {@code key-table}) or by its
 * hop's ({@code app}, {@code service}).
 */
public enum Hop {
  APP("the app",
      "lost-reply", "the reply is lost; the app retries",
      "same-key", "the same key on every retry (idem's client keeps it per intent)"),
  BALANCER("the load balancer",
      "lb-retry", "the upstream reply is lost; the balancer retries the POST",
      "no-post-retry", "never retry a POST (answer 504)"),
  SERVICE("the payments service and its outbox",
      "relay-crash", "the broker's ack is lost after publishing (as if the relay crashed before marking sent)",
      "key-table", "the key table (idempotent executor)"),
  QUEUE("the queue and the worker",
      "redelivery", "the queue redelivers a message the worker already handled",
      "inbox", "the worker's inbox (by message id)"),
  PROVIDER("the payment provider",
      "worker-crash", "the worker crashes after the charge, before its commit",
      "provider-key", "the key sent to the provider (derived, not fresh)"),
  WEBHOOK("the webhook and the email",
      "webhook-again", "the provider delivers the webhook again",
      "webhook-inbox", "the webhook inbox (by event id)");

  private final String where;
  private final String faultName;
  private final String fault;
  private final String guardName;
  private final String guard;

  Hop(String where, String faultName, String fault, String guardName, String guard) {
    this.where = where;
    this.faultName = faultName;
    this.fault = fault;
    this.guardName = guardName;
    this.guard = guard;
  }

  /** The hop's own name: {@code app}, {@code balancer}, ... */
  public String cliName() {
    return name().toLowerCase(Locale.ROOT);
  }

  public String where() {
    return where;
  }

  public String faultName() {
    return faultName;
  }

  public String fault() {
    return fault;
  }

  public String guardName() {
    return guardName;
  }

  public String guard() {
    return guard;
  }

  /** The valid names of faults ({@code faults=true}) or guards, as the command line spells them. */
  public static String validNames(boolean faults) {
    Function<Hop, String> name = faults ? Hop::faultName : Hop::guardName;
    return Arrays.stream(values()).map(h -> name.apply(h) + " (or " + h.cliName() + ")")
        .collect(Collectors.joining(", ")) + ", all, none";
  }

  /**
   * Parses a list such as {@code lost-reply,lb-retry}, {@code app,balancer}, {@code all} or {@code
   * none} (an empty list is none).
   *
   * @throws IllegalArgumentException naming the option and the unknown name, listing the valid ones
   */
  public static Set<Hop> parseList(String option, String text, boolean faults) {
    EnumSet<Hop> hops = EnumSet.noneOf(Hop.class);
    if (text == null || text.isBlank()) {
      return hops;
    }
    for (String part : text.split(",", -1)) {
      String name = part.trim().toLowerCase(Locale.ROOT);
      if (name.equals("none")) {
        continue;
      }
      if (name.equals("all")) {
        hops.addAll(EnumSet.allOf(Hop.class));
        continue;
      }
      Hop found = null;
      for (Hop h : values()) {
        if (h.cliName().equals(name) || (faults ? h.faultName : h.guardName).equals(name)) {
          found = h;
        }
      }
      if (found == null) {
        throw new IllegalArgumentException(
            option + ": unknown " + (faults ? "fault" : "guard") + " '" + part.trim() + "'; valid: " + validNames(faults));
      }
      hops.add(found);
    }
    return hops;
  }

  /** {@code lost-reply,lb-retry}, {@code all} or {@code none}. */
  public static String format(Set<Hop> hops, boolean faults) {
    if (hops.isEmpty()) {
      return "none";
    }
    if (hops.size() == values().length) {
      return "all";
    }
    return hops.stream().map(faults ? Hop::faultName : Hop::guardName).collect(Collectors.joining(","));
  }
}
