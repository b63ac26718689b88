package dev.idem.examples;

import java.util.List;
import java.util.Optional;

/**
 * The seed's "Things to try", as named runs of the lab. Each is also a test
 * ({@code ScenariosTest}) that asserts its counts from the database.
 *
 * @param name the command line's name ({@code --scenario=...})
 * @param setup the faults and guards
 * @param lesson what the run shows, in one line
 */
public record Scenario(String name, Setup setup, String lesson) {

  public static final List<Scenario> ALL = List.of(
      new Scenario("client-fresh-key", Setup.of("lost-reply", "key-table"),
          "only the service guarded: the retry carries a fresh key, the key table cannot know it is a repeat"),
      new Scenario("client-same-key", Setup.of("lost-reply", "same-key,key-table"),
          "the same key on every retry: the key table replays the first payment"),
      new Scenario("balancer-retries-post", Setup.of("lb-retry", "none"),
          "the balancer retries a POST and nothing recognises it"),
      new Scenario("balancer-504-fresh-key", Setup.of("lb-retry", "no-post-retry,key-table"),
          "never retry a POST: the app gets a 504 and retries; with a fresh key the duplicate just moved"),
      new Scenario("balancer-504-same-key", Setup.of("lb-retry", "same-key,no-post-retry,key-table"),
          "never retry a POST, and the app's retry keeps its key: the key table absorbs it"),
      new Scenario("worker-crash-inbox-only", Setup.of("worker-crash", "inbox"),
          "the crash rolled the inbox row back, but the charge had happened: a second charge"),
      new Scenario("worker-crash-provider-key", Setup.of("worker-crash", "inbox,provider-key"),
          "the key sent downstream is derived: the provider replays the first charge"),
      new Scenario("all-broken-webhook-only", Setup.of("all", "webhook-inbox"),
          "every hop broken, only the webhook guarded: six different events, six receipts"),
      new Scenario("all-broken-all-guards", Setup.of("all", "all"),
          "every hop broken, every guard on: one payment, one charge, one receipt"));

  public static Optional<Scenario> named(String name) {
    return ALL.stream().filter(s -> s.name.equals(name)).findFirst();
  }

  public RunResult run() throws Exception {
    return Lab.run(name, setup);
  }
}
