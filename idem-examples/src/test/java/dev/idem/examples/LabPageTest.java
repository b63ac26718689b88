package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The lab page in a real browser: headless Chromium clicks the page's switches and the test reads
 * the counts the page shows, and compares them with the command line's runs of the same faults and
 * guards (each run counts payment rows, charges and receipts in its own database). Skipped where no
 * Chromium is installed.
 */
class LabPageTest {
  static LabPage page;
  static Chromium browser;

  static final Optional<Path> CHROMIUM = Chromium.find();

  @BeforeAll
  static void open() throws Exception {
    if (CHROMIUM.isPresent()) {
      page = LabPage.start(0);
      browser = Chromium.open(CHROMIUM.get(), page.uri());
    }
  }

  @AfterAll
  static void close() throws Exception {
    if (browser != null) {
      browser.close();
    }
    if (page != null) {
      page.close();
    }
  }

  /** Each test starts from a freshly loaded page: the start state, one run done. */
  @BeforeEach
  void reload() throws Exception {
    // Checked per test, so each is reported skipped with the reason (a class-level skip shows as no tests).
    Assumptions.assumeTrue(CHROMIUM.isPresent(), "no Chromium on the PATH, so the lab page is not tested in a"
        + " browser: install Debian's chromium package (apt-get install -y chromium) to run this test");
    browser.evaluate("window.reloaded = false; location.reload(); true");
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (!reloaded()) {
      if (System.nanoTime() > deadline) {
        throw new AssertionError("the page did not reload");
      }
      Thread.sleep(50);
    }
    awaitRuns(1);
  }

  /**
   * Whether the new document is there. An evaluation that straddles the navigation is answered
   * "Inspected target navigated or closed" by Chromium (CI failed once on it): still reloading.
   */
  static boolean reloaded() throws Exception {
    try {
      return browser.evaluate("typeof window.reloaded === 'undefined'").asBoolean();
    } catch (IllegalStateException e) {
      if (e.getMessage() != null && e.getMessage().contains("Inspected target navigated or closed")) {
        return false;
      }
      throw e;
    }
  }

  /** Waits until the page has finished {@code n} runs of the lab and shows the last. */
  static void awaitRuns(int n) throws Exception {
    long deadline = System.nanoTime() + 120_000_000_000L;
    while (System.nanoTime() < deadline) {
      // Right after a reload the new document may not have its body yet: then it is still loading.
      JsonNode state = browser.evaluate("document.body ? {runs: Number(document.body.dataset.runs), busy: document.body.dataset.busy}"
          + " : {runs: 0, busy: 'true'}");
      if (state.get("runs").asInt() >= n && state.get("busy").asText().equals("false")) {
        assertThat(state.get("runs").asInt()).as("runs the page finished").isEqualTo(n);
        return;
      }
      Thread.sleep(100);
    }
    throw new AssertionError("the page did not finish run " + n + "; it shows: "
        + browser.evaluate("document.getElementById('status').textContent").asText());
  }

  /** The counts the page shows: payment rows, card charges, receipt emails. */
  static List<Integer> shown() throws Exception {
    JsonNode n = browser.evaluate("['payment-rows', 'charges', 'receipts'].map(id => Number(document.getElementById(id).textContent))");
    return List.of(n.get(0).asInt(), n.get(1).asInt(), n.get(2).asInt());
  }

  /** The same counts from a run of the command line's lab. */
  static List<Integer> commandLine(Setup setup) throws Exception {
    RunResult r = Lab.run("command-line", setup);
    return List.of(r.paymentRows(), r.charges(), r.receipts());
  }

  static List<String> switchedOn(String kind) throws Exception {
    JsonNode on = browser.evaluate("[...document.querySelectorAll('input[id^=" + kind + "-]:checked')].map(e => e.id)");
    return java.util.stream.StreamSupport.stream(on.spliterator(), false).map(JsonNode::asText).toList();
  }

  @Test
  void theSwitchesRunTheRealLabAndShowItsCounts() throws Exception {
    // The start state: the lost response, no guards. The retry with a fresh key charges twice.
    assertThat(switchedOn("fault")).containsExactly("fault-app");
    assertThat(switchedOn("guard")).isEmpty();
    assertThat(browser.evaluate("document.getElementById('command').textContent").asText())
        .isEqualTo("--faults=lost-reply --guards=none");
    List<Integer> start = shown();
    assertThat(start).isEqualTo(commandLine(LabPage.START)).containsExactly(2, 2, 2);
    assertThat(browser.evaluate("document.getElementById('hop-app').textContent").asText()).contains("Fault fired");
    assertThat(browser.evaluate("document.querySelectorAll('#trace li').length").asInt()).isGreaterThan(5);
    assertThat(browser.evaluate("document.getElementById('trace').textContent").asText())
        .contains("retries with a fresh key");

    // Guard only the service: the key table cannot know a fresh key is a repeat.
    browser.click("#guard-service");
    awaitRuns(2);
    assertThat(shown()).isEqualTo(commandLine(Setup.of("lost-reply", "key-table"))).containsExactly(2, 2, 2);

    // The same key on every retry: the key table replays the first payment.
    browser.click("#guard-app");
    awaitRuns(3);
    assertThat(shown()).isEqualTo(commandLine(Setup.of("lost-reply", "same-key,key-table"))).containsExactly(1, 1, 1);
    assertThat(browser.evaluate("document.getElementById('hop-service').textContent").asText()).contains("Caught 1 repeat");
    assertThat(browser.evaluate("document.getElementById('trace').textContent").asText())
        .contains("retries with the same key").contains("stored in idem_intent_keys before the first send");
  }

  @Test
  void aThingToTrySetsUpItsScenario() throws Exception {
    int before = 1;
    assertThat(browser.evaluate("document.querySelectorAll('#tries li').length").asInt()).isEqualTo(4);
    browser.click("#try-worker-crash-inbox-only");
    awaitRuns(before + 1);
    Scenario s = Scenario.named("worker-crash-inbox-only").orElseThrow();
    assertThat(switchedOn("fault")).containsExactly("fault-provider");
    assertThat(switchedOn("guard")).containsExactly("guard-queue");
    // The crash rolled the inbox row back, but the charge had happened: a second charge.
    RunResult cli = s.run();
    assertThat(shown()).isEqualTo(List.of(cli.paymentRows(), cli.charges(), cli.receipts()));
    assertThat(cli.charges()).isEqualTo(2);
  }
}
