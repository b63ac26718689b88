package dev.idem.examples;

import dev.idem.flyway.IdemFlyway;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.fence.FencingToken;
import dev.idem.fence.StaleFenceException;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.ExternalCall;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.executor.Resolver;
import dev.idem.jdbc.lease.Lease;
import dev.idem.jdbc.transition.Transitions;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.TestDatabase;
import dev.idem.transition.Outcome;
import dev.idem.transition.StatePath;
import dev.idem.window.DedupeWindow;
import dev.idem.window.RepeatSource;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jooq.impl.DSL;

/**
 * The smaller tours: a shipment state machine guarded by conditional transitions, key derivation,
 * a scheduler that fires the same slot twice, and a zombie worker stopped by its fencing token.
 * Each runs in its own database and reports what it printed and the counts it read back.
 */
public final class Tours {
  /** The tours, in the order the full run shows them. */
  public static final List<String> NAMES = List.of("shipment", "keys", "retention", "scheduler", "zombie");

  private Tours() {}

  /**
   * What a tour printed, and the counts it read from the database at the end.
   *
   * @param lines the output
   * @param counts named counts (rows, outcomes) for tests and scripts
   */
  public record Result(List<String> lines, Map<String, Long> counts) {
    public Result {
      lines = List.copyOf(lines);
      counts = Map.copyOf(counts);
    }

    public long count(String name) {
      Long n = counts.get(name);
      if (n == null) {
        throw new IllegalArgumentException("no count named " + name + "; have " + counts.keySet());
      }
      return n;
    }
  }

  static String describe(String tour) {
    return switch (tour) {
      case "shipment" -> "a late or doubled step finds the shipment at or past its target (Transitions)";
      case "keys" -> "child and attempt keys, scopes, and slots (Keys)";
      case "retention" -> "past the provider's 24 hours, look the charge up by reference instead of retrying blind (executeExternal + Resolver)";
      case "scheduler" -> "two scheduler replicas fire the same nightly slot (Keys.scheduledRun + executor)";
      case "zombie" -> "a paused worker wakes after its lease expired and is fenced off (Leases)";
      default -> throw new IllegalArgumentException("tour: unknown tour '" + tour + "'; valid: " + String.join(", ", NAMES));
    };
  }

  static List<String> run(String tour) throws Exception {
    return result(tour).lines();
  }

  public static Result result(String tour) throws Exception {
    describe(tour); // validates the name
    return switch (tour) {
      case "shipment" -> shipment();
      case "keys" -> keys();
      case "retention" -> retention();
      case "scheduler" -> scheduler();
      default -> zombie();
    };
  }

  // ---- shipment ----------------------------------------------------------------------------

  /** The forward path of a shipment (the seed's state machine). */
  static final StatePath SHIPMENT = StatePath.of("PLACED", "PACKED", "SHIPPED", "DELIVERED");

  static Result shipment() throws Exception {
    List<String> out = new ArrayList<>();
    Map<String, Long> counts = new LinkedHashMap<>();
    try (TestDatabase db = TestDatabase.newDatabase("tour_shipment")) {
      LabSql sql = LabSql.of(db);
      HikariDataSource ds = db.dataSource(4);
      Idem idem = Idem.builder(ds).build();
      IdemFlyway.migrate(ds);
      String table = sql.shop("shipments");
      for (String ddl : sql.shipmentsTable()) {
        sql(ds, sql, ddl);
      }
      sql(ds, sql, "INSERT INTO " + table + " (id, status) VALUES ('s1', 'PLACED'), ('s2', 'PLACED'), ('s3', 'CANCELLED'), ('s4', 'PLACED')");
      Transitions shipments = idem.transitions(table).idColumn("id").statusColumn("status")
          .versionColumn("version").path(SHIPMENT).build();

      Outcome first = shipments.advance("s1", "PLACED", "PACKED");
      Outcome repeat = shipments.advance("s1", "PLACED", "PACKED");
      out.add("s1 PLACED->PACKED: " + first + "; the same message again: " + repeat);
      for (String[] step : new String[][] {{"PACKED", "SHIPPED"}, {"SHIPPED", "DELIVERED"}}) {
        shipments.advance("s1", step[0], step[1]);
      }
      Outcome late = shipments.advance("s1", "PLACED", "PACKED");
      out.add("s1 delivered, then the late PLACED->PACKED arrives: " + late + "; s1 is " + status(ds, sql, "s1"));
      sql(ds, sql, "UPDATE " + table + " SET status = 'DELIVERED' WHERE id = 's2'");
      sql(ds, sql, "UPDATE " + table + " SET status = 'PACKED' WHERE id = 's2'"); // the same late message, written blind
      out.add("s2 delivered, the same late message written blind (SET status = 'PACKED'): s2 is " + status(ds, sql, "s2")
          + ", a repeat that was \"idempotent\" and still wrong");
      Outcome cancelled = shipments.advance("s3", "PLACED", "PACKED");
      out.add("s3 CANCELLED, PLACED->PACKED arrives: " + cancelled + " (a side state is not success)");

      // Two workers hold the same message for s4 and both read PLACED: the database picks one.
      List<Outcome> race = race(2, () -> shipments.advance("s4", "PLACED", "PACKED"));
      long applied = race.stream().filter(o -> o == Outcome.APPLIED).count();
      long done = race.stream().filter(o -> o == Outcome.ALREADY_DONE).count();
      out.add("s4, two workers race PLACED->PACKED: " + race + "; s4 is " + status(ds, sql, "s4") + " at version "
          + fetchLong(ds, sql, "SELECT version FROM " + table + " WHERE id = 's4'"));
      counts.put("s1_repeat_already_done", repeat == Outcome.ALREADY_DONE ? 1L : 0L);
      counts.put("s1_late_already_done", late == Outcome.ALREADY_DONE ? 1L : 0L);
      counts.put("s1_delivered", "DELIVERED".equals(status(ds, sql, "s1")) ? 1L : 0L);
      counts.put("s3_conflict", cancelled == Outcome.CONFLICT ? 1L : 0L);
      counts.put("s4_applied", applied);
      counts.put("s4_already_done", done);
      counts.put("s4_version", fetchLong(ds, sql, "SELECT version FROM " + table + " WHERE id = 's4'"));
    }
    return new Result(out, counts);
  }

  // ---- keys ----------------------------------------------------------------------------------

  static Result keys() {
    List<String> out = new ArrayList<>();
    Map<String, Long> counts = new LinkedHashMap<>();
    IdempotencyKey tap = IdempotencyKey.of("payments", "tap-5f1c9e");
    IdempotencyKey onA = Keys.child(tap, "charge"); // computed on machine A
    IdempotencyKey onB = Keys.child(IdempotencyKey.of("payments", "tap-5f1c9e"), "charge"); // on machine B
    out.add("child(tap, \"charge\") on two machines: " + abbreviate(onA) + " == " + abbreviate(onB) + ": " + onA.equals(onB));
    IdempotencyKey card1 = Keys.attempt(onA, 1);
    IdempotencyKey card2 = Keys.attempt(onA, 2);
    out.add("attempt 1 and attempt 2 (the buyer entered a new card): " + abbreviate(card1) + " vs " + abbreviate(card2)
        + ", equal: " + card1.equals(card2));
    IdempotencyKey refund = Keys.child(tap, "refund");
    out.add("two operations never share a key: child(tap, \"refund\") equals child(tap, \"charge\"): " + refund.equals(onA));
    out.add("the same value in two scopes is two keys: " + IdempotencyKey.of("payments", "k1").equals(IdempotencyKey.of("refunds", "k1")));
    Instant slot = Instant.parse("2026-10-28T02:00:00Z");
    IdempotencyKey r1 = Keys.scheduledRun("scheduler", "nightly-invoices", slot);
    IdempotencyKey r2 = Keys.scheduledRun("scheduler", "nightly-invoices", slot);
    out.add("scheduledRun(nightly-invoices, 02:00 slot) on both replicas: " + r1.value() + ", equal: " + r1.equals(r2));
    long refused = 0;
    try {
      Keys.scheduledRun("scheduler", "nightly-invoices", Instant.parse("2026-10-28T02:00:00.734Z"));
    } catch (IllegalArgumentException e) {
      refused++;
      out.add("a slot taken from the clock is refused: " + e.getMessage());
    }
    try {
      IdempotencyKey.of("payments", "tap 5f1c9e");
    } catch (IllegalArgumentException e) {
      refused++;
      out.add("a bad key is refused: " + e.getMessage());
    }
    counts.put("child_stable", onA.equals(onB) ? 1L : 0L);
    counts.put("attempts_differ", card1.equals(card2) ? 0L : 1L);
    counts.put("operations_differ", refund.equals(onA) ? 0L : 1L);
    counts.put("slot_stable", r1.equals(r2) ? 1L : 0L);
    counts.put("refused", refused);
    return new Result(out, counts);
  }

  private static String abbreviate(IdempotencyKey key) {
    return key.value().substring(0, 12) + "...";
  }

  // ---- retention ---------------------------------------------------------------------------

  private static final int AMOUNT_CENTS = 4000;

  static Result retention() throws Exception {
    List<String> out = new ArrayList<>();
    Map<String, Long> counts = new LinkedHashMap<>();
    try (TestDatabase db = TestDatabase.newDatabase("tour_retention")) {
      HikariDataSource ds = db.dataSource(4);
      Idem idem = Idem.builder(ds).build();
      IdemFlyway.migrate(ds);
      IdempotentExecutor charges = idem.executor().name("executor:charges")
          .window(DedupeWindow.covering(RepeatSource.DEAD_LETTER_REDRIVE)).lease(Duration.ofSeconds(30)).build();
      HttpClient client = Http.client();
      try (PaymentProvider provider = PaymentProvider.open(db, 2, new Tally(Setup.of("none", "none")))) {
        for (boolean resolve : new boolean[] {false, true}) {
          String payment = resolve ? "pay_p2" : "pay_p1";
          IdempotencyKey key = IdempotencyKey.of("charges", payment);
          Fingerprint fp = Fingerprint.ofFields(Map.of("payment", payment, "amount_cents", AMOUNT_CENTS));
          AtomicInteger calls = new AtomicInteger();
          ExternalCall<String, IOException> charge = attempt -> {
            Http.Reply reply;
            try {
              reply = Http.post(client, provider.chargesUri(), Map.of("Idempotency-Key", attempt.callKey().value()),
                  Map.of("amount_cents", Integer.toString(AMOUNT_CENTS), "payment_ref", payment));
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
              throw new IOException("interrupted", e);
            }
            if (calls.incrementAndGet() == 1) {
              throw new IOException("the reply was lost"); // the charge happened; we do not know it
            }
            return reply.body().get("charge_id");
          };
          Resolver<String, IOException> byReference = attempt -> {
            try {
              String ids = Http.get(client, URI.create(provider.chargesUri() + "?payment_ref=" + payment)).body()
                  .getOrDefault("charge_ids", "");
              return ids.isEmpty() ? Optional.empty() : Optional.of(ids.split(",")[0]);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
              throw new IOException("interrupted", e);
            }
          };
          try {
            charges.executeExternal(key, fp, Codec.utf8(), charge);
          } catch (IOException e) {
            out.add(payment + ": the charge call's reply is lost; the outcome is unknown (our key stays in flight)");
          }
          provider.age(Duration.ofHours(25)); // the retry comes 25 hours later: the provider pruned the key
          Execution<String> retry = resolve
              ? charges.executeExternal(key, fp, Codec.utf8(), charge, byReference)
              : charges.executeExternal(key, fp, Codec.utf8(), charge);
          int made = provider.charges(payment);
          out.add(payment + ": 25 hours later, " + (resolve ? "the takeover looks the charge up by reference first"
              : "retried blind with the same call key") + ": " + retry.value() + "; charges at the provider: " + made
              + (made > 1 ? " (the key was past the provider's retention)" : ""));
          counts.put(resolve ? "resolved_charges" : "blind_charges", (long) made);
        }
      }
    }
    return new Result(out, counts);
  }

  // ---- scheduler -----------------------------------------------------------------------------

  static Result scheduler() throws Exception {
    List<String> out = new ArrayList<>();
    Map<String, Long> counts = new LinkedHashMap<>();
    try (TestDatabase db = TestDatabase.newDatabase("tour_scheduler")) {
      LabSql sql = LabSql.of(db);
      HikariDataSource ds = db.dataSource(6);
      Idem idem = Idem.builder(ds).build();
      IdemFlyway.migrate(ds);
      sql(ds, sql, sql.invoiceRunsTable());
      IdempotentExecutor executor = idem.executor().name("executor:scheduler").window(DedupeWindow.of(Duration.ofDays(2))).build();
      Instant slot = Instant.parse("2026-10-28T02:00:00Z");

      // Right: both replicas key the run by the slot from the schedule.
      List<Execution<String>> bySlot = race(2, () -> {
        IdempotencyKey key = Keys.scheduledRun("scheduler", "nightly-invoices", slot);
        return executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
          tx.dsl().execute("INSERT INTO invoice_runs (job, run_key) VALUES ('nightly-invoices', ?)", key.value());
          return "invoiced";
        });
      });
      long runs = fetchLong(ds, sql, "SELECT count(*) FROM invoice_runs");
      out.add("two replicas fire the 02:00 slot, keyed by the slot: " + describe(bySlot) + "; invoice runs: " + runs);
      counts.put("slot_keyed_runs", runs);
      counts.put("slot_keyed_applied", bySlot.stream().filter(Execution::applied).count());

      // Wrong: each replica keys the run by its clock when it started (12 ms and 734 ms after the
      // slot: two machines never wake in the same instant), so the keys differ.
      sql(ds, sql, "DELETE FROM invoice_runs");
      AtomicInteger replica = new AtomicInteger();
      List<Execution<String>> byClock = race(2, () -> {
        Instant startedAt = slot.plusMillis(replica.getAndIncrement() == 0 ? 12 : 734);
        IdempotencyKey key = IdempotencyKey.of("scheduler", "nightly-invoices@" + startedAt);
        return executor.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
          tx.dsl().execute("INSERT INTO invoice_runs (job, run_key) VALUES ('nightly-invoices', ?)", key.value());
          return "invoiced";
        });
      });
      long clockRuns = fetchLong(ds, sql, "SELECT count(*) FROM invoice_runs");
      out.add("the same, keyed by each replica's clock when it woke: " + describe(byClock) + "; invoice runs: " + clockRuns
          + " (every customer invoiced twice)");
      counts.put("clock_keyed_runs", clockRuns);
    }
    return new Result(out, counts);
  }

  private static String describe(List<? extends Execution<?>> runs) {
    List<String> kinds = new ArrayList<>();
    for (Execution<?> e : runs) {
      kinds.add(e.applied() ? "applied" : e.replayed() ? "replayed" : "in flight");
    }
    return String.join(" + ", kinds);
  }

  // ---- zombie --------------------------------------------------------------------------------

  static Result zombie() throws Exception {
    List<String> out = new ArrayList<>();
    Map<String, Long> counts = new LinkedHashMap<>();
    try (TestDatabase db = TestDatabase.newDatabase("tour_zombie")) {
      LabSql sql = LabSql.of(db);
      HikariDataSource ds = db.dataSource(4);
      Idem idem = Idem.builder(ds).build();
      IdemFlyway.migrate(ds);
      sql(ds, sql, sql.ledgerBatchesTable());
      String resource = "ledger-export";
      Duration ttl = Duration.ofMillis(1500); // long enough that a loaded machine cannot end it early

      Lease a = idem.leases().acquire(resource, "worker-a", ttl).orElseThrow();
      out.add("worker-a takes the lease on " + resource + " with token " + a.token().value() + " (ttl " + ttl.toMillis() + " ms)");
      Optional<Lease> early = idem.leases().acquire(resource, "worker-b", ttl);
      out.add("worker-b asks while it is held: " + (early.isPresent() ? "granted (wrong!)" : "refused"));
      Thread.sleep(ttl.multipliedBy(2).toMillis()); // worker-a stalls: a GC pause, a stopped VM
      Lease b = idem.leases().acquire(resource, "worker-b", ttl).orElseThrow();
      out.add("worker-a stalls past its ttl; worker-b takes the lease with token " + b.token().value());
      boolean bWrote = fencedWrite(idem, resource, "worker-b", b.token());
      boolean aWrote = fencedWrite(idem, resource, "worker-a", a.token());
      out.add("worker-b writes with token " + b.token().value() + ": " + (bWrote ? "accepted" : "refused"));
      out.add("worker-a wakes and writes with token " + a.token().value() + ": " + (aWrote ? "accepted (a zombie write!)" : "refused, stale fencing token"));
      long rows = fetchLong(ds, sql, "SELECT count(*) FROM ledger_batches");
      out.add("ledger batches written: " + rows + " (by " + String.join(",",
          DSL.using(ds, sql.dialect()).fetch("SELECT holder FROM ledger_batches ORDER BY id").getValues(0, String.class)) + ")");
      counts.put("early_granted", early.isPresent() ? 1L : 0L);
      counts.put("zombie_accepted", aWrote ? 1L : 0L);
      counts.put("rows", rows);
      counts.put("rows_by_worker_a", fetchLong(ds, sql, "SELECT count(*) FROM ledger_batches WHERE holder = 'worker-a'"));
    }
    return new Result(out, counts);
  }

  /** A write that carries the writer's fencing token; a stale token rolls the transaction back. */
  private static boolean fencedWrite(Idem idem, String resource, String holder, FencingToken token) {
    try {
      idem.useTransaction(tx -> {
        idem.leases().checkFence(tx.connection(), resource, token);
        tx.dsl().execute("INSERT INTO ledger_batches (holder, token) VALUES (?, ?)", holder, token.value());
      });
      return true;
    } catch (StaleFenceException e) {
      return false;
    }
  }

  // ---- helpers -------------------------------------------------------------------------------

  /** Runs {@code n} copies of {@code task} on real threads, released together by a latch. */
  static <T> List<T> race(int n, Callable<T> task) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(n, r -> {
      Thread t = new Thread(r, "race");
      t.setDaemon(true);
      return t;
    });
    try {
      CountDownLatch go = new CountDownLatch(1);
      List<Future<T>> futures = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        futures.add(pool.submit(() -> {
          go.await();
          return task.call();
        }));
      }
      go.countDown();
      List<T> results = new ArrayList<>();
      for (Future<T> f : futures) {
        results.add(f.get());
      }
      return results;
    } finally {
      pool.shutdownNow();
    }
  }

  private static void sql(DataSource ds, LabSql sql, String statement) throws SQLException {
    try (Connection c = ds.getConnection()) {
      DSL.using(c, sql.dialect()).execute(statement);
    }
  }

  private static long fetchLong(DataSource ds, LabSql sql, String query) throws SQLException {
    try (Connection c = ds.getConnection()) {
      return DSL.using(c, sql.dialect()).fetchOne(query).get(0, Long.class);
    }
  }

  private static String status(DataSource ds, LabSql sql, String id) throws SQLException {
    try (Connection c = ds.getConnection()) {
      return DSL.using(c, sql.dialect()).fetchOne("SELECT status FROM " + sql.shop("shipments") + " WHERE id = ?", id)
          .get(0, String.class);
    }
  }
}
