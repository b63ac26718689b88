package dev.idem.jdbc.inbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.VendorSql;
import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.tx.Tx;
import dev.idem.key.IdempotencyKey;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.Race;
import dev.idem.testing.RecordingListener;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.io.IOException;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@link Inbox#receiveAll}: every count is read from the database, per message id. */
@IdemTest(poolSize = 12, sql = "CREATE TABLE charges (message_id text NOT NULL, amount int NOT NULL)")
class InboxBatchTest {
  /** A polled message: the id its producer minted, and an amount. */
  record Msg(String id, int amount) {}

  static TestDatabase db;
  static DataSource ds;
  static RecordingListener events = new RecordingListener();
  static Idem idem;
  static Inbox billing;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool) {
    db = database;
    ds = pool;
    idem = Idem.builder(ds).listener(events).build();
    billing = idem.inbox("billing").window(DedupeWindow.of(Duration.ofDays(8))).build();
  }

  @BeforeEach
  void clean() {
    // DELETE on MariaDB: its TRUNCATE waits for the metadata lock of any transaction still open on the table
    db.execute(VendorSql.maria(db) ? "DELETE FROM charges; DELETE FROM idem_inbox" : "TRUNCATE charges; TRUNCATE idem_inbox");
    events.clear();
  }

  static void charge(Tx tx, Msg m) {
    tx.dsl().execute("INSERT INTO charges VALUES (?, ?)", m.id(), m.amount());
  }

  static long charges(String id) {
    return db.count("SELECT count(*) FROM charges WHERE message_id = ?", id);
  }

  static long inboxRows(String id) {
    return db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'billing' AND message_id = ?", id);
  }

  /** The charges per message id, as the database holds them. */
  static Map<String, Long> chargesPerId() {
    Map<String, Long> out = new java.util.TreeMap<>();
    try (Connection c = ds.getConnection(); var st = c.createStatement();
        var rs = st.executeQuery("SELECT message_id, count(*) FROM charges GROUP BY message_id")) {
      while (rs.next()) {
        out.put(rs.getString(1), rs.getLong(2));
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
    return out;
  }

  static List<Msg> batch(String prefix, int from, int to) {
    return IntStream.range(from, to).mapToObj(i -> new Msg(prefix + i, 10)).toList();
  }

  @Test
  void newMessagesApplyOnceAndAReplayOfTheBatchRunsNoEffect() {
    List<Msg> first = batch("m-", 0, 500);
    Received<Msg> r = billing.receiveAll(first, Msg::id, InboxBatchTest::charge);
    assertThat(r.applied()).containsExactlyElementsOf(first);
    assertThat(r.duplicates()).isEmpty();
    assertThat(r.allSettled()).isTrue();

    int[] ran = {0};
    Received<Msg> replay = billing.receiveAll(first, Msg::id, (tx, m) -> {
      ran[0]++;
      charge(tx, m);
    });
    assertThat(ran[0]).isZero();
    assertThat(replay.duplicates()).containsExactlyElementsOf(first);
    assertThat(replay.applied()).isEmpty();
    Map<String, Long> perId = chargesPerId();
    assertThat(perId).hasSize(500).allSatisfy((id, n) -> assertThat(n).as(id).isEqualTo(1));
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'billing'")).isEqualTo(500);

    // events: one applied per id, then one replay per id with its age
    assertThat(events.of(IdemEvent.Applied.class)).hasSize(500);
    assertThat(events.of(IdemEvent.Replayed.class)).hasSize(500)
        .allSatisfy(e -> assertThat(e.age()).isGreaterThanOrEqualTo(Duration.ZERO).isLessThan(Duration.ofMinutes(1)));
  }

  @Test
  void aMixedBatchKeepsTheInputOrderAndAnIdRepeatedInsideItAppliesOnce() {
    billing.receiveAll(List.of(new Msg("old-1", 1), new Msg("old-2", 2)), Msg::id, InboxBatchTest::charge);
    List<Msg> mixed = List.of(new Msg("new-1", 1), new Msg("old-2", 2), new Msg("new-2", 3), new Msg("new-1", 4),
        new Msg("old-1", 5), new Msg("new-1", 6));
    Received<Msg> r = billing.receiveAll(mixed, Msg::id, InboxBatchTest::charge);
    assertThat(r.applied()).containsExactly(mixed.get(0), mixed.get(2));
    assertThat(r.duplicates()).containsExactly(mixed.get(1), mixed.get(3), mixed.get(4), mixed.get(5));
    assertThat(chargesPerId()).containsExactlyInAnyOrderEntriesOf(Map.of("old-1", 1L, "old-2", 1L, "new-1", 1L, "new-2", 1L));
    // the first occurrence's effect ran, with its own message
    assertThat(db.count("SELECT count(*) FROM charges WHERE message_id = 'new-1' AND amount = 1")).isEqualTo(1);
  }

  @Test
  void aFailingEffectRollsBackItsPartAndFreesItsIdWhileTheOthersCommit() {
    List<Msg> msgs = batch("f-", 0, 10);
    Map<String, Integer> runs = new java.util.TreeMap<>();
    Received<Msg> r = billing.receiveAll(msgs, Msg::id, (tx, m) -> {
      runs.merge(m.id(), 1, Integer::sum);
      charge(tx, m); // written, then rolled back with the failure
      if (m.id().equals("f-4") || m.id().equals("f-9")) {
        throw new IOException("ledger refused " + m.id());
      }
    });
    assertThat(r.failed()).extracting(Received.Failure::message).containsExactly(msgs.get(4), msgs.get(9));
    assertThat(r.failed()).extracting(f -> f.error().getMessage()).containsExactly("ledger refused f-4", "ledger refused f-9");
    assertThat(r.applied()).hasSize(8).doesNotContain(msgs.get(4), msgs.get(9));
    assertThat(charges("f-4")).isZero();
    assertThat(charges("f-9")).isZero();
    assertThat(inboxRows("f-4")).as("its id is free").isZero();
    assertThat(inboxRows("f-9")).isZero();
    assertThat(charges("f-3")).isEqualTo(1);
    assertThat(charges("f-5")).isEqualTo(1);
    // The effects before the first failure ran twice: their first run was rolled back with it
    // (effects run with no savepoint each until one fails), their second committed once; the
    // failed effect ran once, and the second failure only rolled back to its own savepoint.
    assertThat(runs).containsExactlyInAnyOrderEntriesOf(Map.of("f-0", 2, "f-1", 2, "f-2", 2, "f-3", 2, "f-4", 1,
        "f-5", 1, "f-6", 1, "f-7", 1, "f-8", 1, "f-9", 1));

    // the broker redelivers the whole batch: only the failed ones run
    Received<Msg> again = billing.receiveAll(msgs, Msg::id, InboxBatchTest::charge);
    assertThat(again.applied()).containsExactly(msgs.get(4), msgs.get(9));
    assertThat(again.duplicates()).hasSize(8);
    assertThat(chargesPerId()).hasSize(10).allSatisfy((id, n) -> assertThat(n).as(id).isEqualTo(1));
  }

  @Test
  void aBatchWhoseOnlyNewMessageFailsReportsItAndKeepsNothingOfIt() throws Exception {
    billing.receiveAll(List.of(new Msg("d-1", 1)), Msg::id, InboxBatchTest::charge);
    for (List<Msg> msgs : List.of(List.of(new Msg("p-1", 1)), List.of(new Msg("d-1", 1), new Msg("p-2", 2)))) {
      Received<Msg> r = billing.receiveAll(msgs, Msg::id, (tx, m) -> {
        charge(tx, m);
        throw new IOException("refused " + m.id());
      });
      assertThat(r.failed()).extracting(Received.Failure::message).containsExactly(msgs.get(msgs.size() - 1));
      assertThat(r.applied()).isEmpty();
      assertThat(r.duplicates()).hasSize(msgs.size() - 1);
    }
    assertThat(chargesPerId()).containsExactly(Map.entry("d-1", 1L));
    assertThat(inboxRows("p-1")).isZero();
    assertThat(inboxRows("p-2")).isZero();
    // and inside a transaction of the caller's, which goes on and commits its own work
    idem.useTransaction(tx -> {
      Received<Msg> r = billing.receiveAll(List.of(new Msg("p-3", 3)), Msg::id, (t, m) -> {
        charge(t, m);
        throw new IOException("refused");
      });
      assertThat(r.failed()).hasSize(1);
      charge(tx, new Msg("callers-own", 9));
    });
    assertThat(charges("callers-own")).isEqualTo(1);
    assertThat(charges("p-3")).isZero();
    assertThat(inboxRows("p-3")).isZero();
  }

  /**
   * PostgreSQL aborts the transaction at the effect's failed statement: that message fails alone,
   * rolled back to its savepoint. MariaDB undoes the failed statement alone, so the message's
   * effect stands and it is applied.
   */
  @Test
  void anEffectThatSwallowsAnSqlErrorFailsAloneAndTheBatchGoesOn() {
    List<Msg> msgs = batch("s-", 0, 3);
    Received<Msg> r = billing.receiveAll(msgs, Msg::id, (tx, m) -> {
      charge(tx, m);
      if (m.id().equals("s-1")) {
        try {
          tx.dsl().execute("INSERT INTO no_such_table VALUES (1)");
        } catch (org.jooq.exception.DataAccessException ignored) {
          // the effect's own mistake, caught
        }
      }
    });
    if (VendorSql.maria(db)) {
      // MariaDB undoes the failed statement alone: the effect's charge stands, and s-1 is applied
      assertThat(r.failed()).isEmpty();
      assertThat(r.applied()).containsExactlyElementsOf(msgs);
      assertThat(chargesPerId()).containsExactlyInAnyOrderEntriesOf(Map.of("s-0", 1L, "s-1", 1L, "s-2", 1L));
      assertThat(inboxRows("s-1")).isEqualTo(1);
      return;
    }
    assertThat(r.failed()).extracting(Received.Failure::message).containsExactly(msgs.get(1));
    assertThat(r.failed().get(0).error()).hasMessageContaining("caught its error");
    assertThat(chargesPerId()).containsExactlyInAnyOrderEntriesOf(Map.of("s-0", 1L, "s-2", 1L));
    assertThat(inboxRows("s-1")).isZero();
  }

  /** At every isolation level (PostgreSQL runs READ UNCOMMITTED as READ COMMITTED; MariaDB has all four). */
  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ",
      "TRANSACTION_SERIALIZABLE"})
  void overlappingBatchesRacingOnRealThreadsApplyEveryIdExactlyOnce(String isolation) throws Exception {
    int copies = 8;
    Inbox billing = Idem.builder(dev.idem.jdbc.Racers.pool(db, copies, isolation)).listener(events).build().inbox("billing")
        .window(DedupeWindow.of(Duration.ofDays(8))).build();
    int ids = 300;
    // each copy delivers a random 150 of the 300 ids, in its own random order, twice over
    List<List<Msg>> deliveries = new ArrayList<>();
    for (int c = 0; c < copies; c++) {
      List<Msg> all = new ArrayList<>(batch("r-", 0, ids));
      java.util.Collections.shuffle(all, ThreadLocalRandom.current());
      deliveries.add(all.subList(0, 150));
    }
    List<Integer> inFlight = Race.together(copies, c -> {
      int held = 0;
      for (int pass = 0; pass < 2; pass++) {
        List<Msg> todo = deliveries.get(c);
        for (int attempt = 0; !todo.isEmpty() && attempt < 20; attempt++) {
          Received<Msg> r = billing.receiveAll(todo, Msg::id, (tx, m) -> {
            charge(tx, m);
            tx.dsl().execute(VendorSql.sleep(db, 0.0005)); // keep the batch open so others meet its claims
          });
          assertThat(r.failed()).isEmpty();
          held += r.inFlight().size();
          todo = r.inFlight(); // redelivered, as a broker would
        }
        assertThat(todo).as("every id settled").isEmpty();
      }
      return held;
    });
    Map<String, Long> perId = chargesPerId();
    java.util.Set<String> delivered = deliveries.stream().flatMap(List::stream).map(Msg::id).collect(Collectors.toSet());
    assertThat(perId.keySet()).isEqualTo(delivered);
    assertThat(perId).allSatisfy((id, n) -> assertThat(n).as(id).isEqualTo(1));
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'billing'")).isEqualTo(delivered.size());
    assertThat(events.of(IdemEvent.Applied.class)).hasSize(delivered.size());
    System.out.println(isolation + ": in flight, redelivered: " + inFlight);
  }

  @Test
  void aBatchInsideATransactionThatRollsBackKeepsNothing() throws Exception {
    List<Msg> msgs = batch("t-", 0, 20);
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      Received<Msg> r = billing.receiveAll(msgs, Msg::id, InboxBatchTest::charge);
      assertThat(r.applied()).hasSize(20);
      throw new IOException("the caller's work failed");
    })).isInstanceOf(IOException.class);
    assertThat(db.count("SELECT count(*) FROM charges")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_inbox")).isZero();

    // committed with the caller's transaction, the caller's own write beside it
    idem.useTransaction(tx -> {
      tx.dsl().execute("INSERT INTO charges VALUES ('caller', 1)");
      Received<Msg> r = billing.receiveAll(msgs, Msg::id, (t, m) -> {
        charge(t, m);
        if (m.id().equals("t-7")) {
          throw new IOException("no");
        }
      });
      assertThat(r.applied()).hasSize(19);
    });
    assertThat(charges("caller")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM charges WHERE message_id LIKE 't-%'")).isEqualTo(19);
    assertThat(inboxRows("t-7")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_inbox")).isEqualTo(19);
  }

  @Test
  void aCopyHeldElsewhereLongerThanTheWaitIsInFlightAndNothingOfItIsWritten() throws Exception {
    Inbox quick = idem.inbox("billing").window(DedupeWindow.of(Duration.ofDays(8))).inFlightWait(Duration.ofMillis(200)).build();
    CountDownLatch claimed = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      // another consumer thread holds h-2 and h-5 uncommitted
      Future<?> holder = pool.submit(() -> billing.receiveAll(List.of(new Msg("h-2", 1), new Msg("h-5", 1)), Msg::id, (tx, m) -> {
        charge(tx, m);
        if (m.id().equals("h-5")) {
          claimed.countDown();
          release.await();
        }
      }));
      assertThat(claimed.await(10, TimeUnit.SECONDS)).isTrue();
      List<Msg> msgs = batch("h-", 0, 8);
      long start = System.nanoTime();
      Received<Msg> r = quick.receiveAll(msgs, Msg::id, InboxBatchTest::charge);
      long tookMillis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertThat(r.inFlight()).containsExactly(msgs.get(2), msgs.get(5));
      assertThat(r.applied()).hasSize(6);
      assertThat(tookMillis).as("a bounded wait, not until the holder ends").isLessThan(9_000);
      assertThat(holder.isDone()).isFalse();
      release.countDown();
      holder.get(10, TimeUnit.SECONDS);
      // now the holder's copies are committed: a redelivery finds them done
      assertThat(quick.receiveAll(r.inFlight(), Msg::id, InboxBatchTest::charge).duplicates()).hasSize(2);
    } finally {
      release.countDown();
      pool.shutdown();
    }
    assertThat(chargesPerId()).hasSize(8).allSatisfy((id, n) -> assertThat(n).as(id).isEqualTo(1));
    // the batch's first claim, which waited out, was its transaction's first statement (no savepoint):
    // rolled back with it, then claimed again, one row per id
    for (Msg m : batch("h-", 0, 8)) {
      assertThat(inboxRows(m.id())).as(m.id()).isEqualTo(1);
    }
    assertThat(events.of(IdemEvent.InFlight.class, IdempotencyKey.of("billing", "h-2"))).hasSize(1);
  }

  @Test
  void aCopyWaitingOnAHolderThatRollsBackAppliesIt() throws Exception {
    CountDownLatch claimed = new CountDownLatch(1);
    CountDownLatch fail = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      Future<?> holder = pool.submit(() -> {
        idem.useTransaction(tx -> {
          billing.receiveAll(List.of(new Msg("w-1", 1)), Msg::id, InboxBatchTest::charge);
          claimed.countDown();
          fail.await();
          throw new IllegalStateException("the holder's transaction fails");
        });
        return null;
      });
      assertThat(claimed.await(10, TimeUnit.SECONDS)).isTrue();
      Future<Received<Msg>> waiter = pool.submit(() -> billing.receiveAll(batch("w-", 0, 3), Msg::id, InboxBatchTest::charge));
      LockWaits.await(db, 1);
      fail.countDown();
      assertThatThrownBy(holder::get).hasCauseInstanceOf(IllegalStateException.class);
      assertThat(waiter.get(10, TimeUnit.SECONDS).applied()).hasSize(3);
    } finally {
      fail.countDown();
      pool.shutdown();
    }
    assertThat(chargesPerId()).containsExactlyInAnyOrderEntriesOf(Map.of("w-0", 1L, "w-1", 1L, "w-2", 1L));
  }

  @Test
  void idsPastTheirWindowAreClaimedAgain() throws Exception {
    Inbox brief = idem.inbox("brief").window(DedupeWindow.of(Duration.ofMillis(200))).build();
    List<Msg> msgs = batch("e-", 0, 5);
    assertThat(brief.receiveAll(msgs, Msg::id, InboxBatchTest::charge).applied()).hasSize(5);
    assertThat(brief.receiveAll(msgs, Msg::id, InboxBatchTest::charge).duplicates()).hasSize(5);
    Poll.until("the ids past their window on the database clock",
        () -> db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'brief' AND expires_at >= " + VendorSql.clock(db)) == 0);
    List<Msg> mixed = new ArrayList<>(msgs);
    mixed.add(new Msg("e-new", 1));
    assertThat(brief.receiveAll(mixed, Msg::id, InboxBatchTest::charge).applied()).containsExactlyElementsOf(mixed);
    assertThat(chargesPerId()).containsEntry("e-0", 2L).containsEntry("e-4", 2L).containsEntry("e-new", 1L);
    assertThat(db.count("SELECT count(*) FROM idem_inbox WHERE consumer = 'brief'")).isEqualTo(6);
  }

  @Test
  void badInputIsRefusedNamingItsPositionAndWritesNothing() {
    List<Msg> good = batch("b-", 0, 3);
    assertThat(billing.receiveAll(List.<Msg>of(), Msg::id, InboxBatchTest::charge))
        .isEqualTo(new ReceivedValue<Msg>(List.of(), List.of(), List.of(), List.of()));
    assertThatThrownBy(() -> billing.receiveAll(null, Msg::id, InboxBatchTest::charge)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("messages");
    assertThatThrownBy(() -> billing.receiveAll(good, null, InboxBatchTest::charge)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("messageId");
    assertThatThrownBy(() -> billing.receiveAll(good, Msg::id, null)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("effect");
    List<Msg> withNull = new ArrayList<>(good);
    withNull.add(1, null);
    assertThatThrownBy(() -> billing.receiveAll(withNull, Msg::id, InboxBatchTest::charge))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("messages[1]");
    for (String bad : new String[] {null, "", "has space", "x".repeat(256)}) {
      List<Msg> withBad = new ArrayList<>(good);
      withBad.add(new Msg(bad, 1));
      assertThatThrownBy(() -> billing.receiveAll(withBad, Msg::id, InboxBatchTest::charge))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("messages[3]");
    }
    assertThat(db.count("SELECT count(*) FROM charges")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_inbox")).isZero();
  }

  @Test
  void anEffectCallingTheBatchAgainWithOneOfItsIdsIsRefused() {
    Received<Msg> r = billing.receiveAll(batch("n-", 0, 2), Msg::id, (tx, m) -> {
      billing.receiveAll(List.of(m), Msg::id, InboxBatchTest::charge);
    });
    assertThat(r.failed()).hasSize(2).allSatisfy(f -> assertThat(f.error()).isInstanceOf(IllegalStateException.class));
    assertThat(db.count("SELECT count(*) FROM charges")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_inbox")).isZero();
  }
}
