package dev.idem.jdbc.inbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.jdbc.Idem;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import dev.idem.transition.Outcome;
import dev.idem.window.DedupeWindow;
import java.io.IOException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class InboxTest {
  static final DedupeWindow DAY = DedupeWindow.of(Duration.ofDays(1));
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start() throws SQLException {
    db = TestPostgres.newDatabase("inbox");
    ds = db.dataSource(20);
    idem = Idem.builder(ds).build();
    idem.migrate();
    exec("CREATE TABLE effects (id bigserial PRIMARY KEY, message_id text NOT NULL, note text)");
  }

  @AfterAll
  static void stop() {
    db.close();
  }

  static void exec(String sql) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement()) {
      st.execute(sql);
    }
  }

  static long count(String sql, String arg) throws SQLException {
    try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, arg);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  static long effects(String messageId) throws SQLException {
    return count("SELECT count(*) FROM effects WHERE message_id = ?", messageId);
  }

  static long inboxRows(String messageId) throws SQLException {
    return count("SELECT count(*) FROM idem.idem_inbox WHERE message_id = ?", messageId);
  }

  static void effect(Connection c, String messageId, String note) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement("INSERT INTO effects (message_id, note) VALUES (?, ?)")) {
      ps.setString(1, messageId);
      ps.setString(2, note);
      ps.executeUpdate();
    }
  }

  @Test
  void aDuplicateIsAlreadyDoneAndDoesNotRunTheEffect() throws Exception {
    Inbox inbox = idem.inbox("billing").window(DAY).build();
    assertThat(inbox.receive("m-dup", tx -> effect(tx.connection(), "m-dup", "first"))).isEqualTo(Outcome.APPLIED);
    assertThat(inbox.receive("m-dup", tx -> effect(tx.connection(), "m-dup", "second"))).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(effects("m-dup")).isEqualTo(1);
    assertThat(inboxRows("m-dup")).isEqualTo(1);
    assertThat(count("SELECT count(*) FROM effects WHERE note = ?", "second")).isZero();
  }

  @Test
  void consumersDeduplicateSeparately() throws Exception {
    Inbox a = idem.inbox("a").window(DAY).build();
    Inbox b = idem.inbox("b").window(DAY).build();
    assertThat(a.receive("m-two", tx -> effect(tx.connection(), "m-two", "a"))).isEqualTo(Outcome.APPLIED);
    assertThat(b.receive("m-two", tx -> effect(tx.connection(), "m-two", "b"))).isEqualTo(Outcome.APPLIED);
    assertThat(effects("m-two")).isEqualTo(2);
  }

  @Test
  void sixteenConcurrentCopiesRunTheEffectOnce() throws Exception {
    Inbox inbox = idem.inbox("race").window(DAY).build();
    int threads = 16;
    CountDownLatch ready = new CountDownLatch(threads);
    CountDownLatch go = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<Outcome>> outcomes = new ArrayList<>();
      for (int i = 0; i < threads; i++) {
        String note = "thread-" + i;
        outcomes.add(pool.submit(() -> {
          ready.countDown();
          go.await();
          return inbox.receive("m-race", tx -> {
            effect(tx.connection(), "m-race", note);
            Thread.sleep(20); // hold the claim open so the others pile up on it
          });
        }));
      }
      ready.await();
      go.countDown();
      List<Outcome> seen = new ArrayList<>();
      for (Future<Outcome> f : outcomes) {
        seen.add(f.get());
      }
      assertThat(seen).filteredOn(o -> o == Outcome.APPLIED).hasSize(1);
      assertThat(seen).filteredOn(o -> o == Outcome.ALREADY_DONE).hasSize(threads - 1);
    } finally {
      pool.shutdownNow();
    }
    assertThat(effects("m-race")).isEqualTo(1);
    assertThat(inboxRows("m-race")).isEqualTo(1);
  }

  @Test
  void aFailingEffectRollsBackTheClaimSoARedeliveryRunsIt() throws Exception {
    Inbox inbox = idem.inbox("fails").window(DAY).build();
    assertThatThrownBy(() -> inbox.receive("m-fail", tx -> {
      effect(tx.connection(), "m-fail", "half");
      throw new IOException("downstream down");
    })).isInstanceOf(IOException.class).hasMessage("downstream down");
    assertThat(effects("m-fail")).isZero();
    assertThat(inboxRows("m-fail")).isZero();
    assertThat(inbox.receive("m-fail", tx -> effect(tx.connection(), "m-fail", "again"))).isEqualTo(Outcome.APPLIED);
    assertThat(effects("m-fail")).isEqualTo(1);
  }

  @Test
  void joinsTheCallersTransactionAndAFailingEffectDoesNotAbortIt() throws Exception {
    Inbox inbox = idem.inbox("joined").window(DAY).build();
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      effect(c, "j-caller", "caller's own work");
      assertThat(inbox.receive(c, "j-1", tx -> {
        assertThat(tx.connection()).isSameAs(c);
        effect(tx.connection(), "j-1", "applied");
      })).isEqualTo(Outcome.APPLIED);
      assertThat(inbox.receive(c, "j-1", tx -> effect(tx.connection(), "j-1", "again"))).isEqualTo(Outcome.ALREADY_DONE);
      assertThatThrownBy(() -> inbox.receive(c, "j-2", tx -> {
        effect(tx.connection(), "j-2", "undone");
        throw new IllegalStateException("bad message");
      })).isInstanceOf(IllegalStateException.class);
      effect(c, "j-caller", "still usable");
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(effects("j-caller")).isEqualTo(2);
    assertThat(effects("j-1")).isEqualTo(1);
    assertThat(effects("j-2")).isZero();
    assertThat(inboxRows("j-2")).isZero();
    assertThat(inbox.receive("j-2", tx -> effect(tx.connection(), "j-2", "redelivered"))).isEqualTo(Outcome.APPLIED);
    assertThat(effects("j-2")).isEqualTo(1);
  }

  @Test
  void aClaimInACallerTransactionThatRollsBackIsForgotten() throws Exception {
    Inbox inbox = idem.inbox("joined-rollback").window(DAY).build();
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThat(inbox.receive(c, "jr-1", tx -> effect(tx.connection(), "jr-1", "rolled back"))).isEqualTo(Outcome.APPLIED);
      c.rollback();
      c.setAutoCommit(true);
    }
    assertThat(effects("jr-1")).isZero();
    assertThat(inboxRows("jr-1")).isZero();
  }

  @Test
  void joinsAnIdemTransactionOpenOnTheThread() throws Exception {
    Inbox inbox = idem.inbox("nested").window(DAY).build();
    idem.useTransaction(tx -> {
      effect(tx.connection(), "n-caller", "outer");
      assertThatThrownBy(() -> inbox.receive("n-1", inner -> {
        assertThat(inner.connection()).isSameAs(tx.connection());
        effect(inner.connection(), "n-1", "undone");
        throw new IOException("nope");
      })).isInstanceOf(IOException.class);
      assertThat(inbox.receive("n-2", inner -> effect(inner.connection(), "n-2", "kept"))).isEqualTo(Outcome.APPLIED);
    });
    assertThat(effects("n-caller")).isEqualTo(1);
    assertThat(effects("n-1")).isZero();
    assertThat(inboxRows("n-1")).isZero();
    assertThat(effects("n-2")).isEqualTo(1);
  }

  @Test
  void anExpiredIdIsClaimedAgainAndExpireDeletesOnlyExpiredRowsOfItsConsumer() throws Exception {
    Inbox shortLived = idem.inbox("short").window(DedupeWindow.of(Duration.ofMillis(300))).build();
    Inbox longLived = idem.inbox("long").window(DAY).build();
    assertThat(shortLived.receive("e-1", tx -> effect(tx.connection(), "e-1", "first"))).isEqualTo(Outcome.APPLIED);
    assertThat(shortLived.receive("e-2", tx -> effect(tx.connection(), "e-2", "first"))).isEqualTo(Outcome.APPLIED);
    assertThat(longLived.receive("e-1", tx -> effect(tx.connection(), "e-1", "long"))).isEqualTo(Outcome.APPLIED);
    assertThat(shortLived.receive("e-1", tx -> effect(tx.connection(), "e-1", "dup"))).isEqualTo(Outcome.ALREADY_DONE);
    Thread.sleep(400); // past the window by the database clock too (same machine)
    assertThat(shortLived.receive("e-1", tx -> effect(tx.connection(), "e-1", "after window"))).isEqualTo(Outcome.APPLIED);
    assertThat(count("SELECT count(*) FROM effects WHERE message_id = 'e-1' AND note = ?", "after window")).isEqualTo(1);
    assertThat(shortLived.expire()).isEqualTo(1); // e-2; e-1 was re-claimed with a new window
    assertThat(count("SELECT count(*) FROM idem.idem_inbox WHERE consumer = ?", "short")).isEqualTo(1);
    assertThat(count("SELECT count(*) FROM idem.idem_inbox WHERE consumer = ?", "long")).isEqualTo(1);
    assertThat(longLived.expire()).isZero();
  }

  @Test
  void badInputIsRefusedAndWritesNothing() throws Exception {
    Inbox inbox = idem.inbox("bad").window(DAY).build();
    for (String bad : new String[] {null, "", "has space", "x".repeat(256), "caf\u00e9"}) {
      assertThatThrownBy(() -> inbox.receive(bad, tx -> effect(tx.connection(), "bad", "ran")))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("message id");
    }
    assertThatThrownBy(() -> inbox.receive("ok", null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("effect");
    try (Connection c = ds.getConnection()) {
      assertThatThrownBy(() -> inbox.receive(c, "ok", tx -> effect(tx.connection(), "bad", "ran")))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("auto-commit");
    }
    assertThat(effects("bad")).isZero();
    assertThat(count("SELECT count(*) FROM idem.idem_inbox WHERE consumer = ?", "bad")).isZero();
    assertThatThrownBy(() -> idem.inbox("bad").build()).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("window");
    assertThatThrownBy(() -> idem.inbox("has space").window(DAY).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("consumer");
  }

  @Test
  void reportsAppliedAndReplayedEvents() throws Exception {
    List<IdemEvent> events = new CopyOnWriteArrayList<>();
    Idem listened = Idem.builder(ds).listener(new IdemListener() {
      @Override
      public void onApplied(IdemEvent.Applied e) {
        events.add(e);
      }

      @Override
      public void onReplayed(IdemEvent.Replayed e) {
        events.add(e);
      }
    }).build();
    Inbox inbox = listened.inbox("events").window(DAY).build();
    inbox.receive("ev-1", tx -> effect(tx.connection(), "ev-1", "x"));
    inbox.receive("ev-1", tx -> effect(tx.connection(), "ev-1", "y"));
    assertThat(events).hasSize(2);
    assertThat(events.get(0)).isInstanceOf(IdemEvent.Applied.class);
    assertThat(events.get(1)).isInstanceOfSatisfying(IdemEvent.Replayed.class, r -> {
      assertThat(r.source()).isEqualTo("inbox:events");
      assertThat(r.key().value()).isEqualTo("ev-1");
      assertThat(r.windowUsed()).isBetween(0.0, 0.01);
    });
    assertThat(effects("ev-1")).isEqualTo(1);
  }
}
