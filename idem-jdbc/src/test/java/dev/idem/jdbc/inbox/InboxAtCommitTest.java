package dev.idem.jdbc.inbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.jdbc.ClaimOrder;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.Tx;
import dev.idem.testing.RecordingListener;
import dev.idem.testing.Race;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import dev.idem.transition.Outcome;
import dev.idem.window.DedupeWindow;
import java.io.IOException;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * The inbox with {@link ClaimOrder#AT_COMMIT}: the effect first, the message id's row with the
 * commit. Rows counted after every kind of copy. A second inbox of the same consumer stands for
 * another process: it has not handled the ids the first did, so it does not read before running.
 */
class InboxAtCommitTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;
  static Inbox billing;
  static Inbox otherProcess;
  static final RecordingListener events = new RecordingListener();

  @BeforeAll
  static void start() {
    db = TestPostgres.newDatabase("inbox_at_commit");
    ds = db.dataSource(20);
    idem = Idem.builder(ds).listener(events).build();
    idem.migrate();
    // The consumer's own table; its primary key is what a repeat's effect runs into.
    db.execute("CREATE TABLE ledger (message_id text PRIMARY KEY, amount int NOT NULL)");
    billing = atCommit("billing", Duration.ofDays(8));
    otherProcess = atCommit("billing", Duration.ofDays(8));
  }

  static Inbox atCommit(String consumer, Duration window) {
    return idem.inbox(consumer).window(DedupeWindow.of(window)).claimOrder(ClaimOrder.AT_COMMIT).build();
  }

  @AfterAll
  static void stop() {
    db.close();
  }

  @BeforeEach
  void clean() {
    db.execute("TRUNCATE ledger; TRUNCATE idem.idem_inbox");
    events.clear();
  }

  static void book(Tx tx, String id, int amount) {
    tx.dsl().execute("INSERT INTO ledger VALUES (?, ?)", id, amount);
  }

  static long ledger(String id) {
    return db.count("SELECT count(*) FROM ledger WHERE message_id = ?", id);
  }

  static long inboxRows(String consumer, String id) {
    return db.count("SELECT count(*) FROM idem.idem_inbox WHERE consumer = ? AND message_id = ?", consumer, id);
  }

  @Test
  void aFirstCopyCommitsItsEffectAndItsRowTogether() {
    assertThat(billing.receive("m-1", tx -> book(tx, "m-1", 10))).isEqualTo(Outcome.APPLIED);
    assertThat(ledger("m-1")).isEqualTo(1);
    assertThat(inboxRows("billing", "m-1")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem.idem_inbox WHERE expires_at - received_at = interval '8 days'")).isEqualTo(1);
    assertThat(events.all()).singleElement().isInstanceOf(IdemEvent.Applied.class);
  }

  @Test
  void aCopyThisInboxHandledIsAlreadyDoneWithoutRunningTheEffect() {
    AtomicInteger runs = new AtomicInteger();
    billing.receive("m-2", tx -> {
      runs.incrementAndGet();
      book(tx, "m-2", 10);
    });
    assertThat(billing.receive("m-2", tx -> {
      runs.incrementAndGet();
      book(tx, "m-2", 10);
    })).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(runs).hasValue(1);
    assertThat(ledger("m-2")).isEqualTo(1);
    assertThat(events.all()).hasSize(2).last().isInstanceOf(IdemEvent.Replayed.class);
  }

  @Test
  void aCopyInAnotherProcessRunsTheEffectButCommitsNothing() {
    AtomicInteger runs = new AtomicInteger();
    billing.receive("m-3", tx -> book(tx, "m-3", 10));
    // An effect that does not collide with the first copy's rows: rolled back all the same.
    assertThat(otherProcess.receive("m-3", tx -> {
      runs.incrementAndGet();
      book(tx, "m-3-again", 10);
    })).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(runs).hasValue(1);
    assertThat(ledger("m-3")).isEqualTo(1);
    assertThat(ledger("m-3-again")).isZero();
    assertThat(inboxRows("billing", "m-3")).isEqualTo(1);
  }

  @Test
  void aCopyWhoseEffectFailsOnTheFirstCopysRowsIsAlreadyDoneNotAnError() {
    billing.receive("m-4", tx -> book(tx, "m-4", 10));
    assertThat(otherProcess.receive("m-4", tx -> book(tx, "m-4", 10))).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(ledger("m-4")).isEqualTo(1);
    assertThat(events.all()).last().isInstanceOfSatisfying(IdemEvent.Replayed.class,
        r -> assertThat(r.age()).isGreaterThanOrEqualTo(Duration.ZERO).isLessThan(Duration.ofMinutes(1)));
  }

  @Test
  void anEffectThatThrowsLeavesNoRowSoTheRedeliveryRuns() {
    IOException failure = new IOException("ledger offline");
    assertThatThrownBy(() -> billing.receive("m-5", tx -> {
      book(tx, "m-5", 10);
      throw failure;
    })).isSameAs(failure);
    assertThat(ledger("m-5")).isZero();
    assertThat(inboxRows("billing", "m-5")).isZero();
    assertThat(billing.receive("m-5", tx -> book(tx, "m-5", 10))).isEqualTo(Outcome.APPLIED);
    assertThat(ledger("m-5")).isEqualTo(1);
  }

  @Test
  void concurrentCopiesCommitTheEffectOnce() throws Exception {
    int copies = 16;
    List<Inbox> processes = new ArrayList<>();
    for (int i = 0; i < copies; i++) {
      processes.add(atCommit("billing", Duration.ofDays(8))); // each copy in a process of its own
    }
    List<Outcome> results = Race.together(copies, i -> processes.get(i).receive("m-race", tx -> {
      tx.dsl().execute("INSERT INTO ledger VALUES ('m-race-' || txid_current(), 1)");
      tx.dsl().execute("SELECT pg_sleep(0.05)");
    }));
    assertThat(results).containsOnlyOnce(Outcome.APPLIED);
    assertThat(db.count("SELECT count(*) FROM ledger WHERE message_id LIKE 'm-race-%'")).isEqualTo(1);
    assertThat(inboxRows("billing", "m-race")).isEqualTo(1);
  }

  @Test
  void aCopyWaitsAtItsCommitForAHolderAndFollowsItsOutcome() throws Exception {
    Inbox claimFirst = idem.inbox("billing").window(DedupeWindow.of(Duration.ofDays(8))).build();
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try (Connection holder = ds.getConnection()) {
      holder.setAutoCommit(false);
      // A receive inside a caller's transaction claims first and holds the id until that ends.
      assertThat(claimFirst.receive(holder, "m-6", tx -> book(tx, "m-6", 1))).isEqualTo(Outcome.APPLIED);
      Future<Outcome> waiting = pool.submit(() -> otherProcess.receive("m-6", tx -> book(tx, "m-6-copy", 2)));
      Thread.sleep(300);
      assertThat(waiting.isDone()).isFalse();
      holder.rollback(); // the holder fails: the waiting copy's own effect commits
      assertThat(waiting.get(10, TimeUnit.SECONDS)).isEqualTo(Outcome.APPLIED);

      assertThat(claimFirst.receive(holder, "m-7", tx -> book(tx, "m-7", 1))).isEqualTo(Outcome.APPLIED);
      Future<Outcome> second = pool.submit(() -> otherProcess.receive("m-7", tx -> book(tx, "m-7-copy", 2)));
      Thread.sleep(300);
      holder.commit(); // the holder succeeds: the waiting copy is rolled back and done
      assertThat(second.get(10, TimeUnit.SECONDS)).isEqualTo(Outcome.ALREADY_DONE);
    } finally {
      pool.shutdown();
    }
    assertThat(ledger("m-6")).isZero();
    assertThat(ledger("m-6-copy")).isEqualTo(1);
    assertThat(ledger("m-7")).isEqualTo(1);
    assertThat(ledger("m-7-copy")).isZero();
    assertThat(inboxRows("billing", "m-6")).isEqualTo(1);
    assertThat(inboxRows("billing", "m-7")).isEqualTo(1);
  }

  @Test
  void anIdPastItsWindowRunsAgain() throws Exception {
    Inbox brief = atCommit("brief", Duration.ofMillis(200));
    assertThat(brief.receive("m-8", tx -> book(tx, "m-8", 1))).isEqualTo(Outcome.APPLIED);
    while (db.count("SELECT count(*) FROM idem.idem_inbox WHERE message_id = 'm-8' AND expires_at < clock_timestamp()") == 0) {
      Thread.sleep(20);
    }
    // Seen lately by this inbox, but past its window: the read finds it gone, the claim takes it over.
    assertThat(brief.receive("m-8", tx -> book(tx, "m-8-again", 1))).isEqualTo(Outcome.APPLIED);
    assertThat(ledger("m-8")).isEqualTo(1);
    assertThat(ledger("m-8-again")).isEqualTo(1);
    assertThat(inboxRows("brief", "m-8")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem.idem_inbox WHERE message_id = 'm-8' AND expires_at > clock_timestamp()")).isEqualTo(1);
  }

  @Test
  void aNullClaimOrderIsRefused() {
    assertThatThrownBy(() -> idem.inbox("c").window(DedupeWindow.of(Duration.ofDays(1))).claimOrder(null).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessage("claimOrder must not be null");
  }
}
