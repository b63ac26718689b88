package dev.idem.docs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.fence.Fence;
import dev.idem.fence.FencingToken;
import dev.idem.fence.StaleFenceException;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.transition.Outcome;
import dev.idem.transition.SequenceRule;
import dev.idem.transition.StatePath;
import dev.idem.window.DedupeWindow;
import dev.idem.window.RepeatSource;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.LongAdder;
import org.junit.jupiter.api.Test;

/**
 * The examples of docs/core-*.md, compiled and run, so they cannot rot. Each block is the page's
 * code, followed by assertions of what its comments claim.
 */
class CoreDocsExamplesTest {

  @Test
  void coreKeys() {
    IdempotencyKey root = IdempotencyKey.of("shop-7", "chk_7f3a9c");
    IdempotencyKey order = Keys.child(root, "order");              // same on every retry
    IdempotencyKey payment = Keys.child(order, "payment");
    IdempotencyKey charge1 = Keys.attempt(payment, 1);             // send to the provider
    IdempotencyKey charge2 = Keys.attempt(payment, 2);             // the buyer picked another card
    IdempotencyKey receipt = Keys.child(order, "email/receipt");   // != Keys.child(order, "email/shipped")

    // Both scheduler replicas act on the run due at 2026-10-28T02:00:00Z.
    IdempotencyKey run = Keys.scheduledRun("scheduler", "nightly-invoices", Instant.parse("2026-10-28T02:00:00Z"));
    // run.value() is "nightly-invoices@2026-10-28T02:00:00Z"

    assertThat(order).isEqualTo(Keys.child(root, "order"));
    assertThat(charge1).isNotEqualTo(charge2);
    assertThat(receipt).isNotEqualTo(Keys.child(order, "email/shipped"));
    assertThat(run.value()).isEqualTo("nightly-invoices@2026-10-28T02:00:00Z");

    Map<String, Object> request = new LinkedHashMap<>();
    request.put("amount", 4000);
    request.put("currency", "USD");
    request.put("ship_to", Map.of("city", "Lyon", "zip", "69001"));
    request.put("items", List.of("sku-1", "sku-2"));
    Fingerprint fp = Fingerprint.ofFields(request);      // the same for these fields in any order
    byte[] body = "{\"amount\":4000,\"currency\":\"USD\"}".getBytes(StandardCharsets.UTF_8);
    Fingerprint raw = Fingerprint.of(body);              // or over bytes already in canonical form

    Map<String, Object> reordered = new LinkedHashMap<>();
    reordered.put("items", List.of("sku-1", "sku-2"));
    reordered.put("ship_to", Map.of("zip", "69001", "city", "Lyon"));
    reordered.put("currency", "USD");
    reordered.put("amount", 4000);
    assertThat(Fingerprint.ofFields(reordered)).isEqualTo(fp);
    assertThat(raw).isNotEqualTo(fp);
  }

  @Test
  void coreTransitions() {
    StatePath shipment = StatePath.of("PLACED", "PACKED", "SHIPPED", "DELIVERED");

    assertThat(shipment.classify("DELIVERED", "PACKED")).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(shipment.classify("PACKED", "PACKED")).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(shipment.classify("CANCELLED", "PACKED")).isEqualTo(Outcome.CONFLICT);
    assertThat(shipment.classify("PLACED", "DELIVERED")).isEqualTo(Outcome.CONFLICT);
    assertThat(shipment.classify(null, "PACKED")).isEqualTo(Outcome.CONFLICT);

    List<Long> applied = new ArrayList<>();
    long last = 0;
    for (long seq : new long[] {1, 2, 2, 1, 4, 3, 5}) {
      if (SequenceRule.shouldApply(last, seq)) {  // applies 1, 2, 4, 5
        applied.add(seq);
        last = seq;
      }
    }
    assertThat(applied).containsExactly(1L, 2L, 4L, 5L);
    assertThat(SequenceRule.outcome(5, 5)).isEqualTo(Outcome.ALREADY_DONE);
  }

  @Test
  void coreFencing() {
    List<String> refused = new ArrayList<>();
    Fence runs = new Fence("runs/nightly-invoices");
    runs.check(new FencingToken(33));   // worker A, before its pause
    runs.check(new FencingToken(34));   // worker B took over
    try {
      runs.check(new FencingToken(33)); // worker A wakes up
    } catch (StaleFenceException e) {
      refused.add(e.getMessage());
    }
    assertThat(refused).containsExactly("write to runs/nightly-invoices with fencing token 33 refused: token 34 was"
        + " granted since, so this writer's lease has ended");
  }

  @Test
  void coreWindows() {
    DedupeWindow webhooks = DedupeWindow.WEBHOOK_RETRIES;                       // 3 days
    DedupeWindow slowest = DedupeWindow.covering(RepeatSource.CLIENT_RETRY,
        RepeatSource.KAFKA_REPLAY);                                             // 7 days
    DedupeWindow ownTopic = DedupeWindow.covering(Duration.ofDays(30));         // your retention

    DedupeWindow checked = DedupeWindow.of(Duration.ofDays(14),
        RepeatSource.WEBHOOK_RETRIES, RepeatSource.DEAD_LETTER_REDRIVE);        // accepted
    assertThatThrownBy(() ->
        DedupeWindow.of(Duration.ofHours(24), RepeatSource.CLIENT_RETRY, RepeatSource.WEBHOOK_RETRIES))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("dedupe window of 1 day is shorter than the slowest path a repeat can take:"
            + " WEBHOOK_RETRIES arrives up to 3 days late, 2 days past the window; a copy arriving after"
            + " the window runs again");

    List<RepeatSource> missed = DedupeWindow.of(Duration.ofDays(1)).shortOf(RepeatSource.values());

    assertThat(webhooks.length()).isEqualTo(Duration.ofDays(3));
    assertThat(slowest.length()).isEqualTo(Duration.ofDays(7));
    assertThat(ownTopic.length()).isEqualTo(Duration.ofDays(30));
    assertThat(checked.length()).isEqualTo(Duration.ofDays(14));
    assertThat(missed).doesNotContain(RepeatSource.CLIENT_RETRY).contains(RepeatSource.WEBHOOK_RETRIES);
    // "A repeat caught on day 2.5 of a 3-day window (0.83)"
    assertThat(webhooks.fractionUsed(Duration.ofHours(60))).isBetween(0.833, 0.834);
    assertThat(webhooks.isNearEnd(Duration.ofHours(60))).isTrue();
  }

  static String respond(Execution<String> e) {
    if (e instanceof Execution.Replayed<String> r) {
      return "200 " + r.value() + " (first completed " + r.firstCompletedAt() + ")";
    } else if (e instanceof Execution.InFlight<String> f) {
      return "409 Retry-After: " + f.retryAfter().toSeconds();
    }
    return "201 " + e.value();
  }

  @Test
  void coreResultsAndEvents() throws Exception {
    assertThat(respond(new Execution.Applied<>("ch_1"))).isEqualTo("201 ch_1");
    assertThat(respond(new Execution.Replayed<>("ch_1", Instant.parse("2026-10-28T02:00:00Z"), Duration.ofSeconds(4))))
        .isEqualTo("200 ch_1 (first completed 2026-10-28T02:00:00Z)");
    assertThat(respond(new Execution.InFlight<>("shop-7:chk_7f3a9c", Duration.ofSeconds(2)))).isEqualTo("409 Retry-After: 2");

    Codec<Void> none = Codec.none();       // stores nothing; replays carry null; the store skips the write
    Codec<String> text = Codec.utf8();     // strings as UTF-8
    Codec<byte[]> raw = Codec.bytes();     // bytes as they are (a copy)
    assertThat(none.storesNothing()).isTrue();
    assertThat(text.decode(text.encode("ch_1"))).isEqualTo("ch_1");
    assertThat(raw.decode(raw.encode(new byte[] {1}))).containsExactly(1);

    List<String> printed = new ArrayList<>();
    IdemListener metrics = new IdemListener() {
      @Override
      public void onReplayed(IdemEvent.Replayed e) {
        if (e.windowUsed() >= DedupeWindow.NEAR_END) {
          printed.add(e.source() + ": repeat of " + e.key() + " caught at " + e.windowUsed()
              + " of its window; later copies are being missed");
        }
      }
    };
    IdempotencyKey key = IdempotencyKey.of("shop-7", "chk_7f3a9c");
    metrics.onReplayed(new IdemEvent.Replayed("executor", key, Duration.ofHours(1), 0.01));
    metrics.onReplayed(new IdemEvent.Replayed("executor", key, Duration.ofHours(66), 66.0 / 72));
    metrics.onApplied(new IdemEvent.Applied("executor", key)); // a default method: does nothing
    assertThat(printed).hasSize(1);
    assertThat(printed.get(0)).startsWith("executor: repeat of shop-7:chk_7f3a9c caught at 0.91");
  }

  @Test
  void coreEventsRepeatsPerHop() {
    Map<String, LongAdder> repeatsPerHop = new ConcurrentHashMap<>();
    List<String> alerts = new CopyOnWriteArrayList<>();
    IdemListener repeats = new IdemListener() {
      private void repeat(IdemEvent e) {
        repeatsPerHop.computeIfAbsent(e.source(), s -> new LongAdder()).increment();
      }

      @Override
      public void onReplayed(IdemEvent.Replayed e) {          // executor, inbox
        repeat(e);
      }

      @Override
      public void onSequenceIgnored(IdemEvent.SequenceIgnored e) {
        repeat(e);
      }

      @Override
      public void onTransition(IdemEvent.Transition e) {
        if (e.outcome() == Outcome.ALREADY_DONE) {
          repeat(e);
        } else if (e.outcome() == Outcome.CONFLICT && e.to().isPresent()) {  // a step, not an edit
          alerts.add(e.source() + ": " + e.id() + " " + e.from().get() + " -> " + e.to().get()
              + " refused, the row is " + (e.rowFound() ? e.state().orElse("NULL") : "missing"));
        }
      }
    };
    IdempotencyKey key = IdempotencyKey.of("billing", "m-1");
    repeats.onReplayed(new IdemEvent.Replayed("inbox:billing", key, Duration.ofSeconds(3), 0.001));
    repeats.onSequenceIgnored(new IdemEvent.SequenceIgnored("sequences:prices", IdempotencyKey.of("prices", "sku-1"), 2));
    repeats.onTransition(new IdemEvent.Transition("transitions:shop.orders", "shop.orders", "o1", Optional.of("PLACED"),
        Optional.of("PACKED"), Outcome.ALREADY_DONE, true, Optional.of("SHIPPED"), OptionalLong.of(3)));
    repeats.onTransition(new IdemEvent.Transition("transitions:shop.orders", "shop.orders", "o3", Optional.of("PLACED"),
        Optional.of("PACKED"), Outcome.CONFLICT, true, Optional.of("CANCELLED"), OptionalLong.of(1)));
    repeats.onTransition(new IdemEvent.Transition("transitions:shop.orders", "shop.orders", "o12", Optional.empty(),
        Optional.empty(), Outcome.CONFLICT, true, Optional.of("PLACED"), OptionalLong.of(2))); // an edit: no alert
    repeats.onTransition(new IdemEvent.Transition("transitions:shop.orders", "shop.orders", "o9", Optional.of("PLACED"),
        Optional.of("PACKED"), Outcome.CONFLICT, false, Optional.empty(), OptionalLong.empty()));
    assertThat(repeatsPerHop).containsOnlyKeys("inbox:billing", "sequences:prices", "transitions:shop.orders");
    assertThat(repeatsPerHop.values()).allSatisfy(n -> assertThat(n.sum()).isEqualTo(1));
    assertThat(alerts).containsExactly(
        "transitions:shop.orders: o3 PLACED -> PACKED refused, the row is CANCELLED",
        "transitions:shop.orders: o9 PLACED -> PACKED refused, the row is missing");
  }
}
