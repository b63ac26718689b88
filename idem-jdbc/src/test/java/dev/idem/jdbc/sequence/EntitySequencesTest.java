package dev.idem.jdbc.sequence;

import static dev.idem.transition.Outcome.ALREADY_DONE;
import static dev.idem.transition.Outcome.APPLIED;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.tx.Tx;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.InFlightException;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Race;
import dev.idem.testing.RecordingListener;
import dev.idem.testing.TestDatabase;
import dev.idem.transition.Outcome;
import java.io.IOException;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Per-entity sequences on a real PostgreSQL, counting the effect rows each event left. */
// A custom schema, to show idem's tables follow it (on MariaDB a database of the class's own: its
// name is idem.schema(), which every Idem here is built on and every read names).
@IdemTest(schema = "idem_seq", poolSize = 8,
    sql = "CREATE TABLE prices (stream text NOT NULL, entity text NOT NULL, seq bigint NOT NULL)")
class EntitySequencesTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool, Idem inSchema) {
    db = database;
    ds = pool;
    idem = inSchema;
  }

  /** The effect: one row per applied event. */
  static void effect(Tx tx, String stream, String entity, long seq) throws SQLException {
    try (var ps = tx.connection().prepareStatement("INSERT INTO prices VALUES (?, ?, ?)")) {
      ps.setString(1, stream);
      ps.setString(2, entity);
      ps.setLong(3, seq);
      ps.executeUpdate();
    }
  }

  static Outcome apply(EntitySequences s, String entity, long seq) throws SQLException {
    return s.applyIfNewer(entity, seq, tx -> effect(tx, s.stream(), entity, seq));
  }

  /** The sequence numbers whose effect ran, in order. */
  static List<Long> effects(String stream, String entity) throws SQLException {
    List<Long> seqs = new ArrayList<>();
    try (Connection c = ds.getConnection();
        var ps = c.prepareStatement("SELECT seq FROM prices WHERE stream = ? AND entity = ? ORDER BY seq")) {
      ps.setString(1, stream);
      ps.setString(2, entity);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          seqs.add(rs.getLong(1));
        }
      }
    }
    return seqs;
  }

  /** idem's sequence table, in the class's schema (on MariaDB, a database). */
  static String sequences() {
    return idem.schema() + ".idem_sequences";
  }

  static boolean maria() {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  static long sequenceRows(String stream) throws SQLException {
    try (Connection c = ds.getConnection();
        var ps = c.prepareStatement("SELECT count(*) FROM " + sequences() + " WHERE stream = ?")) {
      ps.setString(1, stream);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  @Test
  void repeatsAndOutOfOrderEventsAreIgnoredWithoutRunningTheEffect() throws SQLException {
    EntitySequences s = idem.sequences("price-updates");
    assertThat(s.lastApplied("sku-1")).isZero();
    List<Outcome> outcomes = new ArrayList<>();
    for (long seq : new long[] {1, 1, 3, 2, 3, 4, 1}) {
      outcomes.add(apply(s, "sku-1", seq));
    }
    assertThat(outcomes).containsExactly(APPLIED, ALREADY_DONE, APPLIED, ALREADY_DONE, ALREADY_DONE, APPLIED,
        ALREADY_DONE);
    assertThat(effects("price-updates", "sku-1")).containsExactly(1L, 3L, 4L);
    assertThat(s.lastApplied("sku-1")).isEqualTo(4);
    assertThat(sequenceRows("price-updates")).isEqualTo(1); // one number per entity, not a row per event
  }

  @Test
  void entitiesAndStreamsAreIndependent() throws SQLException {
    EntitySequences a = idem.sequences("stream-a");
    EntitySequences b = idem.sequences("stream-b");
    assertThat(apply(a, "e1", 5)).isEqualTo(APPLIED);
    assertThat(apply(a, "e2", 1)).isEqualTo(APPLIED);
    assertThat(apply(b, "e1", 1)).isEqualTo(APPLIED);
    assertThat(apply(a, "e1", 1)).isEqualTo(ALREADY_DONE);
    assertThat(effects("stream-a", "e1")).containsExactly(5L);
    assertThat(effects("stream-a", "e2")).containsExactly(1L);
    assertThat(effects("stream-b", "e1")).containsExactly(1L);
  }

  @Test
  void aFailingEffectRecordsNothingAndTheEventCanBeRetried() throws Exception {
    EntitySequences s = idem.sequences("failing");
    assertThatThrownBy(() -> s.applyIfNewer("sku-9", 7, tx -> {
      effect(tx, "failing", "sku-9", 7);
      throw new IOException("downstream broke");
    })).isInstanceOf(IOException.class).hasMessage("downstream broke");
    assertThat(s.lastApplied("sku-9")).isZero();
    assertThat(effects("failing", "sku-9")).isEmpty();
    assertThat(sequenceRows("failing")).isZero();
    assertThat(apply(s, "sku-9", 7)).isEqualTo(APPLIED);
    assertThat(effects("failing", "sku-9")).containsExactly(7L);
  }

  @Test
  void copiesOfOneEventRacingOnRealConnectionsApplyOnceAndTheOthersAreReportedIgnored() throws Exception {
    RecordingListener seen = new RecordingListener();
    EntitySequences s = listening(seen).sequences("racing");
    int copies = 4;
    int rounds = 15;
    for (long seq = 1; seq <= rounds; seq++) {
      long n = seq;
      List<Outcome> outcomes = Race.together(copies, i -> apply(s, "hot", n));
      assertThat(outcomes).as("seq " + n).containsOnlyOnce(APPLIED).containsOnly(APPLIED, ALREADY_DONE);
      // The copies that lost were repeats caught on this hop, each reported with its number.
      assertThat(seen.all().stream().filter(e -> e instanceof IdemEvent.SequenceIgnored i && i.seq() == n))
          .as("seq " + n).hasSize(copies - 1);
    }
    List<Long> expected = new ArrayList<>();
    for (long seq = 1; seq <= rounds; seq++) {
      expected.add(seq);
    }
    assertThat(effects("racing", "hot")).containsExactlyElementsOf(expected);
    assertThat(seen.all().stream().filter(IdemEvent.Applied.class::isInstance)).hasSize(rounds);
  }

  @Test
  void differentNumbersRacingOnOneEntityNeverApplyAnOlderOneAfterANewer() throws Exception {
    EntitySequences s = idem.sequences("reordered");
    int events = 8;
    List<Outcome> outcomes = Race.together(events, i -> {
      long n = i + 1;
      return s.applyIfNewer("e", n, tx -> {
        // The effect reads the highest applied so far and must always see a lower number.
        try (var ps = tx.connection().prepareStatement(
            "SELECT coalesce(max(seq), 0) FROM prices WHERE stream = 'reordered' AND entity = 'e'");
            ResultSet rs = ps.executeQuery()) {
          rs.next();
          assertThat(rs.getLong(1)).isLessThan(n);
        }
        effect(tx, "reordered", "e", n);
      });
    });
    long applied = outcomes.stream().filter(o -> o == APPLIED).count();
    assertThat(effects("reordered", "e")).hasSize((int) applied).contains(8L);
    assertThat(s.lastApplied("e")).isEqualTo(8);
  }

  /**
   * On a pool at REPEATABLE READ or SERIALIZABLE, six events of one entity at once, each with its own
   * number: a copy whose upsert waited for another's fails with 40001 inside idem, once per racer
   * that beat it. None of that may reach the caller: a late number is ALREADY_DONE, never an error.
   * And at READ UNCOMMITTED and READ COMMITTED (every level MariaDB has).
   */
  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ",
      "TRANSACTION_SERIALIZABLE"})
  void underStricterIsolationRacingNumbersAreAppliedOrIgnoredNeverFailed(String isolation) throws Exception {
    String stream = "strict-" + isolation;
    int copies = 6;
    int rounds = 40;
    try (HikariDataSource strictPool = db.dataSource(copies, isolation)) {
      EntitySequences s = Idem.builder(strictPool).schema(idem.schema()).build().sequences(stream);
      for (int round = 0; round < rounds; round++) {
        int r = round;
        String entity = "e-" + round % 3;
        Race.together(copies, i -> {
          long n = (long) r * copies + i + 1;
          return s.applyIfNewer(entity, n, tx -> effect(tx, stream, entity, n));
        });
      }
      for (int e = 0; e < 3; e++) {
        List<Long> applied = effects(stream, "e-" + e);
        assertThat(applied).isSorted().doesNotHaveDuplicates();
        assertThat(s.lastApplied("e-" + e)).isEqualTo(applied.get(applied.size() - 1));
      }
    }
    assertThat(sequenceRows(stream)).isEqualTo(3);
  }

  @Test
  void theJoinVariantCommitsAndRollsBackWithTheCallersTransaction() throws Exception {
    EntitySequences s = idem.sequences("joined");
    try (Connection c = ds.getConnection()) {
      assertThatThrownBy(() -> s.applyIfNewer(c, "e", 1, tx -> {}))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("auto-commit");
      c.setAutoCommit(false);
      assertThat(s.applyIfNewer(c, "e", 1, tx -> {
        assertThat(tx.connection()).isSameAs(c);
        effect(tx, "joined", "e", 1);
      })).isEqualTo(APPLIED);
      c.rollback();
      assertThat(s.lastApplied("e")).isZero();
      assertThat(effects("joined", "e")).isEmpty();

      assertThat(s.applyIfNewer(c, "e", 1, tx -> effect(tx, "joined", "e", 1))).isEqualTo(APPLIED);
      assertThat(s.applyIfNewer(c, "e", 1, tx -> effect(tx, "joined", "e", 1))).isEqualTo(ALREADY_DONE);
      c.commit();
    }
    assertThat(s.lastApplied("e")).isEqualTo(1);
    assertThat(effects("joined", "e")).containsExactly(1L);
    // Nested in idem's own transaction, it joins too.
    Outcome nested = idem.inTransaction(tx -> s.applyIfNewer(tx.connection(), "e", 2, t -> effect(t, "joined", "e", 2)));
    assertThat(nested).isEqualTo(APPLIED);
    assertThat(effects("joined", "e")).containsExactly(1L, 2L);
  }

  @Test
  void aFailingEffectInTheCallersTransactionLeavesNoRecordEvenIfTheCallerCommits() throws Exception {
    EntitySequences s = idem.sequences("joined-failure");
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThatThrownBy(() -> s.applyIfNewer(c, "e", 1, tx -> {
        effect(tx, "joined-failure", "e", 1);
        throw new java.io.IOException("effect failed");
      })).isInstanceOf(java.io.IOException.class);
      c.commit(); // a caller that catches and commits must not lose the event
    }
    assertThat(s.lastApplied("e")).isZero();
    assertThat(effects("joined-failure", "e")).isEmpty();
    assertThat(s.applyIfNewer("e", 1, tx -> effect(tx, "joined-failure", "e", 1))).isEqualTo(APPLIED);
    assertThat(effects("joined-failure", "e")).containsExactly(1L);
  }

  @Test
  void badInputIsRefusedAndWritesNothing() throws SQLException {
    assertThatThrownBy(() -> idem.sequences(null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("stream");
    assertThatThrownBy(() -> idem.sequences("two words"))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("stream");
    EntitySequences s = idem.sequences("bad-input");
    assertThatThrownBy(() -> apply(s, null, 1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("entity");
    assertThatThrownBy(() -> apply(s, "caf\u00e9", 1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("entity");
    assertThatThrownBy(() -> apply(s, "e", 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("seq");
    assertThatThrownBy(() -> apply(s, "e", -5))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("seq");
    assertThatThrownBy(() -> s.applyIfNewer("e", 1, null))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("effect");
    assertThatThrownBy(() -> s.applyIfNewer((Connection) null, "e", 1, tx -> {}))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("callerTx");
    assertThat(sequenceRows("bad-input")).isZero();
    assertThat(effects("bad-input", "e")).isEmpty();
  }

  // ---------------------------------------------------------------- events

  /** An {@link Idem} on the same schema whose listener records every event in {@code seen}. */
  static Idem listening(RecordingListener seen) {
    return Idem.builder(ds).schema(idem.schema()).listener(seen).build();
  }

  /** The highest number committed for {@code entity}, read on another connection. */
  static long committed(String stream, String entity) {
    return db.count("SELECT coalesce(max(last_applied), 0) FROM " + sequences() + " WHERE stream = ? AND entity = ?",
        stream, entity);
  }

  @Test
  void everyEventIsReportedAsAppliedOrIgnoredUnderItsStreamAndEntity() throws SQLException {
    RecordingListener seen = new RecordingListener();
    EntitySequences s = listening(seen).sequences("ev-prices");
    for (long seq : new long[] {1, 1, 3, 2, 3, 4, 1}) {
      apply(s, "sku-1", seq);
    }
    IdempotencyKey sku = IdempotencyKey.of("ev-prices", "sku-1");
    assertThat(seen.all()).containsExactly(
        new IdemEvent.Applied("sequences:ev-prices", sku),
        new IdemEvent.SequenceIgnored("sequences:ev-prices", sku, 1),
        new IdemEvent.Applied("sequences:ev-prices", sku),
        new IdemEvent.SequenceIgnored("sequences:ev-prices", sku, 2),
        new IdemEvent.SequenceIgnored("sequences:ev-prices", sku, 3),
        new IdemEvent.Applied("sequences:ev-prices", sku),
        new IdemEvent.SequenceIgnored("sequences:ev-prices", sku, 1));
    // Three Applied events, three effect rows: the events count what the table holds.
    assertThat(effects("ev-prices", "sku-1")).containsExactly(1L, 3L, 4L);
    assertThat(committed("ev-prices", "sku-1")).isEqualTo(4);
  }

  @Test
  void anAppliedEventIsReportedAfterCommitWhenOwnedAndOnceRecordedWhenJoined() throws Exception {
    List<Long> committedAtEvent = new CopyOnWriteArrayList<>();
    Idem watching = Idem.builder(ds).schema(idem.schema()).listener(new IdemListener() {
      @Override
      public void onApplied(IdemEvent.Applied event) {
        committedAtEvent.add(committed("ev-commit", event.key().value()));
      }
    }).build();
    EntitySequences s = watching.sequences("ev-commit");
    // Owned: the listener, reading on another connection, already sees the number committed.
    assertThat(apply(s, "e", 1)).isEqualTo(APPLIED);
    assertThat(committedAtEvent).containsExactly(1L);
    // Joined: reported once recorded in the caller's transaction, which has not committed yet...
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThat(s.applyIfNewer(c, "e", 2, tx -> effect(tx, "ev-commit", "e", 2))).isEqualTo(APPLIED);
      assertThat(committedAtEvent).containsExactly(1L, 1L);
      c.rollback();
    }
    // ...and the rollback takes the number and the effect back, not the event.
    assertThat(committed("ev-commit", "e")).isEqualTo(1);
    assertThat(effects("ev-commit", "e")).containsExactly(1L);
    assertThat(committedAtEvent).hasSize(2);
  }

  @Test
  void aFailingEffectReportsNothing() throws Exception {
    RecordingListener seen = new RecordingListener();
    EntitySequences s = listening(seen).sequences("ev-failing");
    assertThatThrownBy(() -> s.applyIfNewer("e", 1, tx -> {
      effect(tx, "ev-failing", "e", 1);
      throw new IOException("downstream broke");
    })).isInstanceOf(IOException.class);
    assertThat(seen.all()).isEmpty();
    assertThat(committed("ev-failing", "e")).isZero();
    assertThat(apply(s, "e", 1)).isEqualTo(APPLIED);
    assertThat(seen.all()).containsExactly(new IdemEvent.Applied("sequences:ev-failing", IdempotencyKey.of("ev-failing", "e")));
  }

  @Test
  void aListenerThatThrowsBreaksNothing() throws SQLException {
    List<String> reached = new CopyOnWriteArrayList<>();
    Idem broken = Idem.builder(ds).schema(idem.schema()).listener(new IdemListener() {
      @Override
      public void onApplied(IdemEvent.Applied event) {
        reached.add("applied");
        throw new IllegalStateException("metrics backend down");
      }

      @Override
      public void onSequenceIgnored(IdemEvent.SequenceIgnored event) {
        reached.add("ignored");
        throw new IllegalStateException("metrics backend down");
      }
    }).build();
    EntitySequences s = broken.sequences("ev-broken");
    assertThat(apply(s, "e", 1)).isEqualTo(APPLIED);
    assertThat(apply(s, "e", 1)).isEqualTo(ALREADY_DONE);
    assertThat(reached).containsExactly("applied", "ignored");
    assertThat(effects("ev-broken", "e")).containsExactly(1L);
    assertThat(committed("ev-broken", "e")).isEqualTo(1);
  }

  /**
   * A copy of an event whose first copy is still running (its transaction holds the entity's row)
   * waits at most EntitySequences.WAIT, then is answered in flight with nothing recorded; once the
   * first commits, the copy is ALREADY_DONE.
   */
  @Test
  void aCopyBehindAStalledFirstCopyIsInFlightNotHeld() throws Exception {
    EntitySequences s = idem.sequences("stalled");
    try (Connection holder = ds.getConnection()) {
      holder.setAutoCommit(false);
      assertThat(s.applyIfNewer(holder, "e", 5, tx -> effect(tx, "stalled", "e", 5))).isEqualTo(Outcome.APPLIED);
      long started = System.nanoTime();
      assertThatThrownBy(() -> s.applyIfNewer("e", 5, tx -> effect(tx, "stalled", "e", 5)))
          .isInstanceOf(InFlightException.class).hasMessageContaining("stalled/e");
      assertThat(java.time.Duration.ofNanos(System.nanoTime() - started)).isLessThan(java.time.Duration.ofSeconds(20));
      holder.commit();
    }
    assertThat(s.applyIfNewer("e", 5, tx -> effect(tx, "stalled", "e", 5))).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(effects("stalled", "e")).hasSize(1);
  }

  /**
   * A repeat or a late event (at or below the highest committed number) writes nothing: the
   * entity's row is not locked (its xmax stays 0), and a copy of a newer event still running on
   * another connection does not hold it up (the upsert alone waited for that copy's row lock, up to
   * WAIT, and was then answered in flight).
   */
  @Test
  void aRepeatWritesNothingAndDoesNotWaitForANewerEventInFlight() throws Exception {
    EntitySequences s = idem.sequences("quiet");
    assertThat(apply(s, "e", 5)).isEqualTo(APPLIED);
    assertThat(apply(s, "e", 5)).isEqualTo(ALREADY_DONE);
    assertThat(apply(s, "e", 3)).isEqualTo(ALREADY_DONE);
    if (!maria()) {
      // PostgreSQL's record of a lock on the row; MariaDB keeps none a session can read. That the
      // repeats below are answered at once, beside a holder of the row, shows they take no lock.
      assertThat(rowLocker("quiet", "e")).as("the row's xmax: no repeat locked it").isEqualTo("0");
    }
    try (Connection holder = ds.getConnection()) {
      holder.setAutoCommit(false);
      assertThat(s.applyIfNewer(holder, "e", 7, tx -> effect(tx, "quiet", "e", 7))).isEqualTo(APPLIED);
      // 7 is recorded but not committed: a repeat of 5 is answered from the committed 5, at once
      assertThat(apply(s, "e", 5)).isEqualTo(ALREADY_DONE);
      assertThat(apply(s, "e", 4)).isEqualTo(ALREADY_DONE);
      holder.commit();
    }
    assertThat(apply(s, "e", 7)).isEqualTo(ALREADY_DONE);
    assertThat(apply(s, "e", 8)).isEqualTo(APPLIED);
    assertThat(effects("quiet", "e")).containsExactly(5L, 7L, 8L);
    assertThat(committed("quiet", "e")).isEqualTo(8);
  }

  /**
   * An effect that applies an event of its own entity again is refused (its row is the outer
   * call's, uncommitted), and the outer call rolls back with the refusal: nothing is recorded, no
   * effect row is left, and the event applies when it comes again. Another entity inside the effect
   * is applied as usual.
   */
  @Test
  void anEffectApplyingItsOwnEntityAgainIsRefusedAndRecordsNothing() throws Exception {
    EntitySequences s = idem.sequences("nested");
    assertThatThrownBy(() -> s.applyIfNewer("e", 3, tx -> {
      effect(tx, "nested", "e", 3);
      s.applyIfNewer("e", 4, inner -> effect(inner, "nested", "e", 4));
    })).isInstanceOf(IllegalStateException.class).hasMessageContaining("its own key");
    assertThat(effects("nested", "e")).isEmpty();
    assertThat(committed("nested", "e")).isZero();

    assertThat(s.applyIfNewer("e", 3, tx -> {
      effect(tx, "nested", "e", 3);
      assertThat(s.applyIfNewer("other", 1, inner -> effect(inner, "nested", "other", 1))).isEqualTo(APPLIED);
    })).isEqualTo(APPLIED);
    assertThat(effects("nested", "e")).containsExactly(3L);
    assertThat(effects("nested", "other")).containsExactly(1L);
    assertThat(committed("nested", "e")).isEqualTo(3);
  }

  /**
   * A pool whose statement_timeout (300 ms) is shorter than the wait ({@link EntitySequences#WAIT}):
   * a copy behind a first copy still running is answered in flight, never with the cancelled
   * statement (57014), and records nothing; the caller's statement_timeout is in force in the effect.
   * MariaDB: a pool's max_statement_time; the claim waits its own bound under it (PostgreSQL only:
   * the caller's limit ending a slow statement of the effect with an error, which MariaDB's SLEEP
   * does not give).
   */
  @Test
  void aPoolStatementTimeoutShorterThanTheWaitIsInFlightNotAnError() throws Exception {
    try (HikariDataSource timed = db.dataSourceWithDriverParams(2, maria() ? "sessionVariables=max_statement_time=0.3"
        : "options=-c%20statement_timeout%3D300")) {
      EntitySequences s = Idem.builder(timed).schema(idem.schema()).build().sequences("timed");
      try (Connection holder = ds.getConnection()) {
        holder.setAutoCommit(false);
        assertThat(s.applyIfNewer(holder, "e", 5, tx -> effect(tx, "timed", "e", 5))).isEqualTo(APPLIED);
        assertThatThrownBy(() -> s.applyIfNewer("e", 6, tx -> effect(tx, "timed", "e", 6)))
            .isInstanceOf(InFlightException.class).hasMessageContaining("timed/e");
        holder.commit();
      }
      assertThat(effects("timed", "e")).containsExactly(5L);
      assertThat(committed("timed", "e")).isEqualTo(5);
      if (maria()) {
        return;
      }
      // the effect runs under the pool's own statement_timeout again
      assertThatThrownBy(() -> s.applyIfNewer("e", 7, tx -> {
        try (Statement st = tx.connection().createStatement()) {
          st.execute("SELECT pg_sleep(1)");
        }
      })).hasMessageContaining("statement timeout");
      assertThat(committed("timed", "e")).isEqualTo(5);
    }
  }

  /** The xmax of the entity's row, as text: "0" if no transaction locked or replaced it since it was written. */
  static String rowLocker(String stream, String entity) throws SQLException {
    try (Connection c = ds.getConnection();
        var ps = c.prepareStatement("SELECT xmax::text FROM " + sequences() + " WHERE stream = ? AND entity = ?")) {
      ps.setString(1, stream);
      ps.setString(2, entity);
      try (ResultSet rs = ps.executeQuery()) {
        assertThat(rs.next()).isTrue();
        return rs.getString(1);
      }
    }
  }
}
