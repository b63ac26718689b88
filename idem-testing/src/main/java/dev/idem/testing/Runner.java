package dev.idem.testing;

import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;
import java.util.stream.Collectors;

/** One {@link Repeats#run()}: its trials, each a fresh intent delivered one way and counted. */
final class Runner implements AutoCloseable {
  private static final Duration FIRST_BACKOFF = Duration.ofMillis(10);
  private static final Duration LONGEST_BACKOFF = Duration.ofMillis(500);
  private static final AtomicInteger THREADS = new AtomicInteger();

  private final Effects effects;
  private final Target target;
  private final FaultyDataSource faults;
  private final Map<Delivery, String> expected;
  private final IdemRows idemRows;
  private final int concurrentCopies;
  private final int messages;
  private final int attempts;
  private final Duration timeout;
  private final ExecutorService threads = Executors.newCachedThreadPool(r -> {
    Thread t = new Thread(r, "idem-repeats-" + THREADS.incrementAndGet());
    t.setDaemon(true); // an abandoned copy never keeps the JVM alive
    return t;
  });
  /** The clean delivery before the kills, shared by both killing deliveries. */
  private Clean clean;

  Runner(Effects effects, Target target, FaultyDataSource faults, Map<Delivery, String> expected, IdemRows idemRows,
      int concurrentCopies, int messages, int attempts, Duration timeout) {
    this.effects = effects;
    this.target = target;
    this.faults = faults;
    this.expected = expected;
    this.idemRows = idemRows;
    this.concurrentCopies = concurrentCopies;
    this.messages = messages;
    this.attempts = attempts;
    this.timeout = timeout;
  }

  List<RepeatReport.Trial> trials(Delivery d) {
    return switch (d) {
      case CONCURRENT -> List.of(concurrent());
      case REPLY_LOST -> List.of(replyLost());
      case KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT -> killed(d);
      case PAST_WINDOW -> List.of(pastWindow());
      case FRESH_KEY -> List.of(freshKey());
      case OUT_OF_ORDER -> List.of(outOfOrder());
    };
  }

  private RepeatReport.Trial concurrent() {
    String intent = effects.freshIntent("concurrent");
    String key = key();
    List<String> outcomes = burst(concurrentCopies, i -> new Copy(Delivery.CONCURRENT, intent, key, i + 1, 1));
    Steps steps = new Steps();
    steps.add(concurrentCopies + " copies at once", key, summary(outcomes), effects.count(intent), "");
    return judged(Delivery.CONCURRENT, "", intent, steps);
  }

  private RepeatReport.Trial replyLost() {
    String intent = effects.freshIntent("reply-lost");
    String key = key();
    Steps steps = new Steps();
    steps.add("copy 1", key, deliver(new Copy(Delivery.REPLY_LOST, intent, key, 1, 1), true) + ", reply discarded",
        effects.count(intent), "");
    steps.add("copy 2", key, deliver(new Copy(Delivery.REPLY_LOST, intent, key, 2, 1), false), effects.count(intent), "");
    return judged(Delivery.REPLY_LOST, "", intent, steps);
  }

  private RepeatReport.Trial freshKey() {
    String intent = effects.freshIntent("fresh-key");
    String first = key();
    String second = key();
    Steps steps = new Steps();
    steps.add("copy 1", first, deliver(new Copy(Delivery.FRESH_KEY, intent, first, 1, 1), true) + ", reply discarded",
        effects.count(intent), "");
    steps.add("copy 2, a fresh key", second, deliver(new Copy(Delivery.FRESH_KEY, intent, second, 2, 1), false),
        effects.count(intent), "");
    return judged(Delivery.FRESH_KEY, "", intent, steps);
  }

  private RepeatReport.Trial pastWindow() {
    String intent = effects.freshIntent("past-window");
    String key = key();
    Steps steps = new Steps();
    String outcome = deliver(new Copy(Delivery.PAST_WINDOW, intent, key, 1, 1), false);
    long first = effects.count(intent);
    steps.add("copy 1", key, outcome, first, "");
    int aged = idemRows.age(key, intent);
    String note = aged > 0
        ? "sent after idem's " + (aged == 1 ? "row for the key was" : aged + " rows for the key were") + " aged past the window"
        : "nothing to age: idem has no row within its window for key " + key + " or intent " + intent
            + " (is the service guarded by idem under this key?)";
    outcome = deliver(new Copy(Delivery.PAST_WINDOW, intent, key, 2, 1), false);
    long second = effects.count(intent);
    if (aged > 0 && second == first && idemRows.pastWindow(key, intent) > 0) {
      note += "; idem's row was not claimed again: the copy was answered before idem's table (from a guard's memory:"
          + " build the service's Idem with answersFromMemory(Duration.ZERO) to test the window) or refused by the service";
    }
    steps.add("copy 2", key, outcome, second, note);
    return judged(Delivery.PAST_WINDOW, "", intent, steps);
  }

  /** One trial per writing commit of a clean delivery, that commit killed before or after it commits. */
  private List<RepeatReport.Trial> killed(Delivery d) {
    boolean first = clean == null;
    Clean c = clean(d);
    if (c.problem != null) {
      return List.of(new RepeatReport.Trial(d, "a clean delivery first", c.intent, true, false, c.effects, c.problem, c.steps.list));
    }
    boolean after = d == Delivery.KILLED_AFTER_COMMIT;
    List<RepeatReport.Trial> trials = new ArrayList<>();
    if (first) {
      // Reported as a trial of its own: it is one more intent delivered, and its effects elsewhere
      // (a provider's charge, a message sent) are the user's to count too.
      trials.add(judged(d, "a clean delivery, nothing killed", c.intent, c.steps));
    }
    for (int k = 1; k <= c.commits.size(); k++) {
      String intent = effects.freshIntent(after ? "killed-after-" + k : "killed-before-" + k);
      String key = key();
      FaultyDataSource.Watch w = watch(k, after);
      String outcome;
      try {
        outcome = deliver(new Copy(d, intent, key, 1, 1), false);
      } finally {
        faults.stop(w);
      }
      String note = w.kill != null ? w.kill
          : "writing commit " + k + " was not reached: this delivery made " + w.writing.get() + " writing commits, the clean one "
              + c.commits.size();
      Steps steps = new Steps();
      steps.add("copy 1", key, outcome, effects.count(intent), note);
      RepeatReport.Trial t = judged(d, "writing commit " + k + " of " + c.commits.size(), intent, steps);
      if (!w.killed) {
        t = new RepeatReport.Trial(d, t.variant(), intent, true, false, t.effects(), "not tested: " + note, t.steps());
      }
      trials.add(t);
    }
    return trials;
  }

  /** A clean delivery, watched: how many writing commits one delivery makes, to kill each in turn. */
  private Clean clean(Delivery d) {
    if (clean != null) {
      return clean;
    }
    String intent = effects.freshIntent("killed-clean");
    String key = key();
    FaultyDataSource.Watch w = watch(0, false);
    String outcome;
    try {
      outcome = deliver(new Copy(d, intent, key, 1, 1), false);
    } finally {
      faults.stop(w);
    }
    long n = effects.count(intent);
    List<String> commits = List.copyOf(w.commits);
    Steps steps = new Steps();
    steps.add("copy 1, nothing killed", key, outcome, n, commits.isEmpty() ? "" : "writing commits: " + String.join(", ", commits));
    String problem = null;
    if (commits.isEmpty()) {
      problem = "not tested: a clean delivery made no writing commit through the FaultyDataSource; give the service"
          + " FaultyDataSource.wrap(pool) instead of the pool";
    } else if (n != 1) {
      problem = "not tested: a clean delivery, nothing killed, made " + n + " effects, want 1";
    }
    clean = new Clean(intent, n, commits, steps, problem);
    return clean;
  }

  private record Clean(String intent, long effects, List<String> commits, Steps steps, String problem) {}

  private FaultyDataSource.Watch watch(int killAt, boolean after) {
    try {
      return faults.watch(killAt, after);
    } catch (SQLException e) {
      throw new IllegalStateException("could not take the connection that kills the service's backend from "
          + faults.target(), e);
    }
  }

  /**
   * Messages 1..n of one intent, each twice, shuffled, and message 1 once more at the end, late
   * (after a newer message).
   * Holds when no message's effect is there twice and the highest sequence in the table is n.
   */
  private RepeatReport.Trial outOfOrder() {
    String intent = effects.freshIntent("out-of-order");
    List<String> keys = new ArrayList<>();
    List<Integer> order = new ArrayList<>();
    for (int seq = 1; seq <= messages; seq++) {
      keys.add(key());
      order.add(seq);
      order.add(seq);
    }
    Collections.shuffle(order, ThreadLocalRandom.current());
    // The late copy of message 1 must follow a newer message, or it is no later than its twins.
    int newer = order.size() - 1;
    while (order.get(newer) == 1) {
      newer--;
    }
    Collections.swap(order, newer, order.size() - 1);
    order.add(1);
    Steps steps = new Steps();
    long newest = 0;
    List<Long> seqs = List.of();
    List<String> repeats = List.of();
    for (int i = 0; i < order.size(); i++) {
      int seq = order.get(i);
      String outcome = deliver(new Copy(Delivery.OUT_OF_ORDER, intent, keys.get(seq - 1), i + 1, seq), false);
      seqs = effects.sequences(intent);
      long top = seqs.isEmpty() ? 0 : seqs.get(seqs.size() - 1);
      List<String> notes = new ArrayList<>();
      List<String> now = repeated(seqs);
      for (String r : now) {
        if (!repeats.contains(r)) {
          notes.add(r); // only what this copy did
        }
      }
      repeats = now;
      if (top < newest) {
        notes.add("moved the intent back from message " + newest + " to " + top);
      }
      newest = top;
      steps.addAsIs("copy " + (i + 1) + " (message " + seq + ")", keys.get(seq - 1), outcome, seqs.size(), String.join("; ", notes));
    }
    List<String> problems = new ArrayList<>();
    problems.addAll(repeated(seqs));
    if (newest != messages) {
      problems.add(seqs.isEmpty() ? "no effect at all" : "ends at message " + newest + ", not " + messages + ": a late message moved it back");
    }
    String variant = "messages 1.." + messages + " in the order " + order.stream().map(String::valueOf).collect(Collectors.joining(" "));
    String verdict = problems.isEmpty()
        ? seqs.size() + (seqs.size() == 1 ? " effect" : " effects") + ", no message twice, ends at message " + messages
        : String.join("; ", problems);
    return new RepeatReport.Trial(Delivery.OUT_OF_ORDER, variant, intent, true, problems.isEmpty(), seqs.size(), verdict, steps.list);
  }

  /** "message 2 applied twice" for each sequence number with more than one row. */
  private static List<String> repeated(List<Long> seqs) {
    Map<Long, Integer> counts = new TreeMap<>();
    seqs.forEach(s -> counts.merge(s, 1, Integer::sum));
    return counts.entrySet().stream().filter(e -> e.getValue() > 1)
        .map(e -> "message " + e.getKey() + " applied " + (e.getValue() == 2 ? "twice" : e.getValue() + " times")).toList();
  }

  /** The trial's verdict on one effect per intent, with what the report says of deliveries outside the guarantee. */
  private RepeatReport.Trial judged(Delivery d, String variant, String intent, Steps steps) {
    long n = steps.list.get(steps.list.size() - 1).effectsAfter();
    String effectsText = n == 1 ? "1 effect" : n + " effects";
    String because = expected.get(d);
    boolean asserted = d.withinGuarantee() || because != null;
    String verdict;
    if (d.withinGuarantee()) {
      verdict = n == 1 ? effectsText : effectsText + ", want 1" + (n == 0
          ? " (the effect never happened: it was lost, or the request does not carry copy.intent() to " + effects + ")" : "");
    } else if (asserted) {
      verdict = effectsText + (n == 1 ? "" : ", want 1") + ", expected because " + because + " (outside idem's guarantee: "
          + d.advice() + ")";
    } else {
      verdict = effectsText + ", outside idem's guarantee, not asserted: " + d.advice();
    }
    return new RepeatReport.Trial(d, variant, intent, asserted, !asserted || n == 1, n, verdict, steps.list);
  }

  /** Steps, each counting the effects it added beyond the one the intent may have. */
  private static final class Steps {
    final List<RepeatReport.Step> list = new ArrayList<>();
    private long before;

    void add(String copy, String key, String outcome, long after, String note) {
      list.add(new RepeatReport.Step(copy, key, outcome, after, Math.max(0, after - Math.max(before, 1)), note));
      before = after;
    }

    /** A step of a trial with a property of its own ({@link Delivery#OUT_OF_ORDER}): no extra counted. */
    void addAsIs(String copy, String key, String outcome, long after, String note) {
      list.add(new RepeatReport.Step(copy, key, outcome, after, 0, note));
      before = after;
    }
  }

  /** {@code n} copies started together at a latch, each on a thread of its own; their outcomes in order. */
  private List<String> burst(int n, IntFunction<Copy> copies) {
    CountDownLatch ready = new CountDownLatch(n);
    CountDownLatch go = new CountDownLatch(1);
    List<Future<String>> running = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      Copy copy = copies.apply(i);
      running.add(threads.submit(() -> {
        ready.countDown();
        if (!go.await(timeout.toNanos(), TimeUnit.NANOSECONDS)) {
          return "not started: the burst did not start within " + seconds(timeout);
        }
        return attempts(copy, false);
      }));
    }
    try {
      if (!ready.await(timeout.toNanos(), TimeUnit.NANOSECONDS)) {
        running.forEach(f -> f.cancel(true));
        throw new IllegalStateException(n + " threads for the burst were not ready within " + seconds(timeout));
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      running.forEach(f -> f.cancel(true));
      throw new IllegalStateException("interrupted starting the burst", e);
    }
    go.countDown();
    long deadline = System.nanoTime() + timeout.toNanos() + grace();
    List<String> outcomes = new ArrayList<>(n);
    for (Future<String> f : running) {
      outcomes.add(awaited(f, deadline));
    }
    return outcomes;
  }

  /** Delivers {@code copy} (once: its first attempt only), on a thread of its own, bounded by the timeout. */
  private String deliver(Copy copy, boolean once) {
    Future<String> f = threads.submit(() -> attempts(copy, once));
    return awaited(f, System.nanoTime() + timeout.toNanos() + grace());
  }

  /** Time for an attempt the timeout ran out in to return: the copy's time is checked between attempts. */
  private long grace() {
    return Math.min(timeout.toNanos(), Duration.ofSeconds(5).toNanos());
  }

  private String awaited(Future<String> f, long deadline) {
    try {
      return f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      f.cancel(true);
      return "no answer within " + seconds(timeout) + ", abandoned";
    } catch (ExecutionException e) {
      return "the kit failed: " + Require.describe(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      f.cancel(true);
      throw new IllegalStateException("interrupted while a copy was delivered", e);
    }
  }

  /** One copy's attempts, as a sender makes them: again while the target asks, within the bounds. */
  private String attempts(Copy copy, boolean once) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    List<String> outcomes = new ArrayList<>();
    Duration backoff = FIRST_BACKOFF;
    for (int attempt = 1; ; attempt++) {
      Target.Attempt a;
      try {
        a = target.send(copy);
        if (a == null) {
          a = Target.Attempt.done("no answer: the target returned null");
        }
      } catch (InterruptedException e) {
        throw e;
      } catch (Exception e) {
        a = Target.Attempt.again("threw " + Require.describe(e));
      }
      outcomes.add(a.outcome());
      if (!a.again() || once) {
        break;
      }
      if (attempt >= attempts) {
        outcomes.add("gave up after " + attempts + " attempts");
        break;
      }
      // A sender waits as long as the receiver asked (Retry-After), else its own back-off.
      Duration pause = a.retryAfter().compareTo(backoff) > 0 ? a.retryAfter() : backoff;
      if (System.nanoTime() + pause.toNanos() - deadline > 0) {
        outcomes.add("gave up: " + seconds(timeout) + " over" + (pause == backoff ? "" : " before the " + seconds(pause) + " asked for"));
        break;
      }
      Thread.sleep(pause.toMillis()); // a sender's back-off between attempts, not an ordering
      backoff = backoff.multipliedBy(2).compareTo(LONGEST_BACKOFF) > 0 ? LONGEST_BACKOFF : backoff.multipliedBy(2);
    }
    return String.join(" → ", outcomes);
  }

  /** {@code 201 ×1, 201 replayed ×7}: the burst's outcomes, alike ones counted. */
  private static String summary(List<String> outcomes) {
    Map<String, Integer> counts = new LinkedHashMap<>();
    outcomes.forEach(o -> counts.merge(o, 1, Integer::sum));
    return counts.entrySet().stream().map(e -> e.getKey() + " ×" + e.getValue()).collect(Collectors.joining(", "));
  }

  /** A fresh key: a UUIDv7, which every key layout of idem accepts. */
  private static String key() {
    return TimedKeys.uuidV7(Instant.now());
  }

  private static String seconds(Duration d) {
    return d.toMillis() % 1000 == 0 ? d.toSeconds() + " s" : d.toMillis() + " ms";
  }

  @Override
  public void close() {
    threads.shutdownNow();
    if (target instanceof AutoCloseable closeable) {
      try {
        closeable.close();
      } catch (Exception ignored) {
        // the report is made; a target that cannot close its clients leaves them to the JVM
      }
    }
  }
}
