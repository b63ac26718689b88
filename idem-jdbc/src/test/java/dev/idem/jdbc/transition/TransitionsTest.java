package dev.idem.jdbc.transition;

import static dev.idem.transition.Outcome.ALREADY_DONE;
import static dev.idem.transition.Outcome.APPLIED;
import static dev.idem.transition.Outcome.CONFLICT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.event.IdemEvent;
import dev.idem.event.IdemListener;
import dev.idem.fence.FencingToken;
import dev.idem.fence.StaleFenceException;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.Racers;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Race;
import dev.idem.testing.RecordingListener;
import dev.idem.testing.TestDatabase;
import dev.idem.transition.Outcome;
import dev.idem.transition.StatePath;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Conditional transitions on a real orders table, the seed's shipment walkthrough, on PostgreSQL
 * and on MariaDB. The table is named with its schema, {@link #ORDERS}: {@code shop.orders} on
 * PostgreSQL; on MariaDB, where a schema is a database, the test database's own name.
 */
@IdemTest(poolSize = 6)
class TransitionsTest {
  static final StatePath SHIPMENT = StatePath.of("PLACED", "PACKED", "SHIPPED", "DELIVERED");
  /** The orders table, with its schema. */
  static String ORDERS;

  static TestDatabase db;
  static DataSource ds;
  static Idem idem;
  static Transitions orders;
  /** The same table, through an {@link Idem} whose listener records every event in {@link #seen}. */
  static Transitions watched;
  static final RecordingListener seen = new RecordingListener();

  @BeforeAll
  static void start(TestDatabase database, DataSource pool, Idem injected) {
    db = database;
    ds = pool;
    idem = injected;
    if (mariadb()) {
      ORDERS = db.name() + ".orders";
      sql("CREATE TABLE " + ORDERS + " (id varchar(64) PRIMARY KEY, status varchar(32) NOT NULL,"
          + " version int NOT NULL DEFAULT 1, fence bigint, note text)");
    } else {
      ORDERS = "shop.orders";
      sql("CREATE SCHEMA shop");
      sql("CREATE TABLE shop.orders (id text PRIMARY KEY, status text NOT NULL, version int NOT NULL DEFAULT 1,"
          + " fence bigint, note text)");
    }
    orders = idem.transitions(ORDERS)
        .idColumn("id").statusColumn("status").versionColumn("version").fenceColumn("fence")
        .path(SHIPMENT)
        .build();
    Idem listening = Idem.builder(ds).listener(seen).build();
    watched = listening.transitions(ORDERS)
        .idColumn("id").statusColumn("status").versionColumn("version").fenceColumn("fence")
        .path(SHIPMENT)
        .build();
  }

  static boolean mariadb() {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  static void sql(String statement) {
    db.execute(statement);
  }

  static void insert(String id, String status) throws SQLException {
    sql("INSERT INTO " + ORDERS + " (id, status) VALUES ('" + id + "', '" + status + "')");
  }

  /** The row as the database has it: "STATUS v<version> fence=<fence> note=<note>", or "none". */
  static String row(String id) throws SQLException {
    try (Connection c = ds.getConnection();
        var ps = c.prepareStatement("SELECT status, version, fence, note FROM " + ORDERS + " WHERE id = ?")) {
      ps.setString(1, id);
      try (ResultSet rs = ps.executeQuery()) {
        if (!rs.next()) {
          return "none";
        }
        return rs.getString(1) + " v" + rs.getInt(2) + " fence=" + rs.getObject(3) + " note=" + rs.getString(4);
      }
    }
  }

  static long count(String table) {
    return db.count("SELECT count(*) FROM " + table);
  }

  /** The events {@link #watched} emitted about row {@code id}, in order. */
  static List<IdemEvent> eventsOf(String id) {
    return seen.all().stream()
        .filter(e -> e instanceof IdemEvent.Transition t && t.id().equals(id)
            || e instanceof IdemEvent.StaleFence f && f.resource().equals(ORDERS + "/" + id))
        .toList();
  }

  static List<Outcome> outcomesOf(String id) {
    return eventsOf(id).stream().map(e -> ((IdemEvent.Transition) e).outcome()).toList();
  }

  /** A step's event as {@link #watched} must emit it. */
  static IdemEvent.Transition stepEvent(String id, String from, String to, Outcome outcome, boolean rowFound,
      String state, Long version) {
    return new IdemEvent.Transition("transitions:" + ORDERS, ORDERS, id, Optional.of(from), Optional.of(to),
        outcome, rowFound, Optional.ofNullable(state), version == null ? OptionalLong.empty() : OptionalLong.of(version));
  }

  /** An edit's event (no step) as {@link #watched} must emit it. */
  static IdemEvent.Transition editEvent(String id, Outcome outcome, boolean rowFound, String state, Long version) {
    return new IdemEvent.Transition("transitions:" + ORDERS, ORDERS, id, Optional.empty(), Optional.empty(),
        outcome, rowFound, Optional.ofNullable(state), version == null ? OptionalLong.empty() : OptionalLong.of(version));
  }

  static Outcome advance(String id, String from, String to) throws SQLException {
    try (Connection c = ds.getConnection()) {
      return orders.advance(c, id, from, to);
    }
  }

  @Test
  void theSeedsShipmentWalkthrough() throws SQLException {
    insert("o1", "PLACED");
    assertThat(advance("o1", "PLACED", "PACKED")).isEqualTo(APPLIED);
    // The queue redelivers the warehouse message after a consumer crash.
    assertThat(advance("o1", "PLACED", "PACKED")).isEqualTo(ALREADY_DONE);
    assertThat(row("o1")).isEqualTo("PACKED v2 fence=null note=null");
    assertThat(advance("o1", "PACKED", "SHIPPED")).isEqualTo(APPLIED); // carrier webhook
    assertThat(advance("o1", "PACKED", "SHIPPED")).isEqualTo(ALREADY_DONE); // sent again
    assertThat(advance("o1", "SHIPPED", "DELIVERED")).isEqualTo(APPLIED);
    // A delayed copy of the first message arrives last. The condition keeps the order DELIVERED.
    assertThat(advance("o1", "PLACED", "PACKED")).isEqualTo(ALREADY_DONE);
    // Three changes, four repeats ignored: the version counts only the changes.
    assertThat(row("o1")).isEqualTo("DELIVERED v4 fence=null note=null");

    // The same late message, written blind, moves the delivered order back to PACKED.
    sql("UPDATE " + ORDERS + " SET status = 'PACKED' WHERE id = 'o1'");
    assertThat(row("o1")).startsWith("PACKED ");
  }

  @Test
  void twoWorkersRacingOnOneOrderOnRealConnectionsApplyItOnceAndReportOneApplyAndOneRepeat() throws Exception {
    int rounds = 20;
    List<String> ids = new ArrayList<>();
    for (int i = 0; i < rounds; i++) {
      ids.add("race-" + i);
      insert("race-" + i, "PLACED");
    }
    for (String id : ids) {
      List<Outcome> outcomes = Race.together(2, w -> {
        try (Connection c = ds.getConnection()) {
          c.setAutoCommit(false);
          Outcome o = watched.advance(c, id, "PLACED", "PACKED");
          c.commit();
          return o;
        }
      });
      assertThat(outcomes).as(id).containsExactlyInAnyOrder(APPLIED, ALREADY_DONE);
      assertThat(outcomesOf(id)).as(id).containsExactlyInAnyOrderElementsOf(outcomes);
      assertThat(row(id)).as(id).isEqualTo("PACKED v2 fence=null note=null");
    }
  }

  @Test
  void aCancelledOrderIsAConflictAndIsLeftAlone() throws SQLException {
    insert("o3", "CANCELLED");
    try (Connection c = ds.getConnection()) {
      TransitionResult r = orders.step(c, "o3", "PLACED", "PACKED");
      assertThat(r).isEqualTo(new TransitionResultValue(CONFLICT, true, Optional.of("CANCELLED"), OptionalLong.of(1)));
      assertThat(r.outcome().isSuccess()).isFalse();
    }
    assertThat(row("o3")).isEqualTo("CANCELLED v1 fence=null note=null");
  }

  @Test
  void aStepArrivingBeforeTheOneItFollowsIsAConflict() throws SQLException {
    insert("o5", "PLACED");
    assertThat(advance("o5", "PACKED", "SHIPPED")).isEqualTo(CONFLICT);
    assertThat(row("o5")).isEqualTo("PLACED v1 fence=null note=null");
  }

  @Test
  void aMissingRowIsAConflictAndNothingIsInserted() throws SQLException {
    long before = count(ORDERS);
    try (Connection c = ds.getConnection()) {
      TransitionResult r = orders.step(c, "no-such-order", "PLACED", "PACKED");
      assertThat(r).isEqualTo(new TransitionResultValue(CONFLICT, false, Optional.empty(), OptionalLong.empty()));
    }
    assertThat(count(ORDERS)).isEqualTo(before);
  }

  @Test
  void stepReportsTheStateAndVersionTheWriteLeft() throws SQLException {
    insert("o7", "PLACED");
    try (Connection c = ds.getConnection()) {
      assertThat(orders.step(c, "o7", "PLACED", "PACKED"))
          .isEqualTo(new TransitionResultValue(APPLIED, true, Optional.of("PACKED"), OptionalLong.of(2)));
      assertThat(orders.step(c, "o7", "PLACED", "PACKED"))
          .isEqualTo(new TransitionResultValue(ALREADY_DONE, true, Optional.of("PACKED"), OptionalLong.of(2)));
    }
  }

  @Test
  void aSideStateTargetIsReachedOnceAndThenAlreadyDone() throws SQLException {
    insert("o8", "PLACED");
    assertThat(advance("o8", "PLACED", "CANCELLED")).isEqualTo(APPLIED);
    assertThat(advance("o8", "PLACED", "CANCELLED")).isEqualTo(ALREADY_DONE);
    assertThat(advance("o8", "PLACED", "PACKED")).isEqualTo(CONFLICT);
    assertThat(row("o8")).isEqualTo("CANCELLED v2 fence=null note=null");
  }

  @Test
  void insideIdemsTransactionARolledBackStepLeavesNothing() throws SQLException {
    insert("o9", "PLACED");
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      assertThat(orders.advance(tx.connection(), "o9", "PLACED", "PACKED")).isEqualTo(APPLIED);
      throw new IllegalStateException("the rest of the handler failed");
    })).isInstanceOf(IllegalStateException.class);
    assertThat(row("o9")).isEqualTo("PLACED v1 fence=null note=null");
    Outcome second = idem.inTransaction(tx -> orders.advance(tx.connection(), "o9", "PLACED", "PACKED"));
    assertThat(second).isEqualTo(APPLIED);
    assertThat(row("o9")).isEqualTo("PACKED v2 fence=null note=null");
  }

  @Test
  void badArgumentsAreRefusedAndChangeNothing() throws SQLException {
    insert("o10", "PLACED");
    try (Connection c = ds.getConnection()) {
      assertThatThrownBy(() -> orders.advance(c, null, "PLACED", "PACKED"))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("id");
      assertThatThrownBy(() -> orders.advance(c, "o10", null, "PACKED"))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("from");
      assertThatThrownBy(() -> orders.advance(c, "o10", "PLACED", " "))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("to");
      assertThatThrownBy(() -> orders.advance(c, "o10", "PLACED", "PLACED"))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must change");
      assertThatThrownBy(() -> orders.advance(c, "o10", "SHIPPED", "PLACED"))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("cannot go back");
      assertThatThrownBy(() -> orders.advance((Connection) null, "o10", "PLACED", "PACKED"))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("tx");
      assertThatThrownBy(() -> orders.advanceFenced(c, "o10", "PLACED", "PACKED", null))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("token");
    }
    assertThat(row("o10")).isEqualTo("PLACED v1 fence=null note=null");
  }

  @Test
  void maliciousNamesAreRefusedAndChangeNothing() throws SQLException {
    long before = count(ORDERS);
    List<String> tables = List.of("orders; DROP TABLE shop.orders; --", "shop.orders\"", "shop.`orders`", "a.b.c", "",
        ".orders", "shop.", "1orders", "orders --");
    for (String t : tables) {
      assertThatThrownBy(() -> idem.transitions(t).path(SHIPMENT).build())
          .as(t).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("table");
    }
    String evil = "status = 'DELIVERED' --";
    assertThatThrownBy(() -> idem.transitions(ORDERS).statusColumn(evil).path(SHIPMENT).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("statusColumn");
    assertThatThrownBy(() -> idem.transitions(ORDERS).idColumn("id\" OR 1=1").path(SHIPMENT).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("idColumn");
    assertThatThrownBy(() -> idem.transitions(ORDERS).idColumn("id` OR 1=1").path(SHIPMENT).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("idColumn");
    assertThatThrownBy(() -> idem.transitions(ORDERS).versionColumn("version; DROP").path(SHIPMENT).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("versionColumn");
    assertThatThrownBy(() -> idem.transitions(ORDERS).fenceColumn("f(1)").path(SHIPMENT).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("fenceColumn");
    assertThatThrownBy(() -> idem.transitions(ORDERS).versionColumn("status").path(SHIPMENT).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("must differ");
    assertThatThrownBy(() -> idem.transitions(ORDERS).build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("path");
    insert("o11", "PLACED");
    try (Connection c = ds.getConnection()) {
      Map<String, Object> values = Map.of("note = 'x', status", "DELIVERED");
      assertThatThrownBy(() -> orders.updateAtVersion(c, "o11", 1, values))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("column");
      // A value is bound, never rendered: SQL in a value is stored as text.
      orders.updateAtVersion(c, "o11", 1, Map.of("note", "x'; DROP TABLE shop.orders; --\\"));
    }
    assertThat(count(ORDERS)).isEqualTo(before + 1);
    assertThat(row("o11")).isEqualTo("PLACED v2 fence=null note=x'; DROP TABLE shop.orders; --\\");
  }

  @Test
  void anEditAtTheExpectedVersionAppliesOnceAndAStaleOneIsAConflictWithTheCurrentVersion() throws SQLException {
    insert("o12", "PLACED");
    try (Connection c = ds.getConnection()) {
      assertThat(orders.updateAtVersion(c, "o12", 1, Map.of("note", "gift wrap")))
          .isEqualTo(new TransitionResultValue(APPLIED, true, Optional.of("PLACED"), OptionalLong.of(2)));
      // A second editor that read version 1 too: refused, told the row is at version 2.
      assertThat(orders.updateAtVersion(c, "o12", 1, Map.of("note", "no wrap")))
          .isEqualTo(new TransitionResultValue(CONFLICT, true, Optional.of("PLACED"), OptionalLong.of(2)));
      assertThat(orders.updateAtVersion(c, "missing", 1, Map.of("note", "x")))
          .isEqualTo(new TransitionResultValue(CONFLICT, false, Optional.empty(), OptionalLong.empty()));
      assertThatThrownBy(() -> orders.updateAtVersion(c, "o12", 2, Map.of("status", "DELIVERED")))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("advance");
      assertThatThrownBy(() -> orders.updateAtVersion(c, "o12", 2, Map.of("version", 9)))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("version");
      assertThatThrownBy(() -> orders.updateAtVersion(c, "o12", 2, Map.of()))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least one");
      assertThatThrownBy(() -> orders.updateAtVersion(c, "o12", 2, null))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("values");
    }
    assertThat(row("o12")).isEqualTo("PLACED v2 fence=null note=gift wrap");
  }

  @Test
  void editorsRacingAtOneVersionApplyOnce() throws Exception {
    insert("o13", "PLACED");
    int editors = 4;
    List<Outcome> outcomes = Race.together(editors, i -> {
      try (Connection c = ds.getConnection()) {
        return orders.updateAtVersion(c, "o13", 1, Map.of("note", "editor-" + i)).outcome();
      }
    });
    assertThat(outcomes).containsOnlyOnce(APPLIED).containsOnly(APPLIED, CONFLICT);
    assertThat(row("o13")).startsWith("PLACED v2 fence=null note=editor-");
  }

  @Test
  void aFencedWriteWithAnOlderTokenIsRefusedAndWritesNothing() throws SQLException {
    insert("run-1", "PLACED");
    try (Connection c = ds.getConnection()) {
      // Worker with token 2 writes first; the row now remembers 2.
      assertThat(orders.writeFenced(c, "run-1", new FencingToken(2), Map.of("note", "result of 2")).outcome())
          .isEqualTo(APPLIED);
      // The paused worker with token 1 wakes up and tries to write its stale result.
      assertThatThrownBy(() -> orders.writeFenced(c, "run-1", new FencingToken(1), Map.of("note", "result of 1")))
          .isInstanceOfSatisfying(StaleFenceException.class, e -> {
            assertThat(e.token()).isEqualTo(1);
            assertThat(e.highest()).isEqualTo(2);
          });
      assertThat(row("run-1")).isEqualTo("PLACED v2 fence=2 note=result of 2");
      // The same token writes again; a later one too, and raises the fence.
      assertThat(orders.writeFenced(c, "run-1", new FencingToken(2), Map.of()).outcome()).isEqualTo(APPLIED);
      assertThat(orders.writeFenced(c, "run-1", new FencingToken(3), Map.of("note", "result of 3")).outcome())
          .isEqualTo(APPLIED);
      assertThat(orders.writeFenced(c, "missing", new FencingToken(3), Map.of("note", "x")).outcome())
          .isEqualTo(CONFLICT);
    }
    assertThat(row("run-1")).isEqualTo("PLACED v4 fence=3 note=result of 3");
  }

  @Test
  void aFencedStepChecksTheTokenAndThePath() throws SQLException {
    insert("o14", "PLACED");
    try (Connection c = ds.getConnection()) {
      assertThat(orders.advanceFenced(c, "o14", "PLACED", "PACKED", new FencingToken(5)).outcome()).isEqualTo(APPLIED);
      assertThat(orders.advanceFenced(c, "o14", "PLACED", "PACKED", new FencingToken(5)).outcome())
          .isEqualTo(ALREADY_DONE);
      assertThatThrownBy(() -> orders.advanceFenced(c, "o14", "PACKED", "SHIPPED", new FencingToken(4)))
          .isInstanceOf(StaleFenceException.class).hasMessageContaining("token 5");
      assertThat(row("o14")).isEqualTo("PACKED v2 fence=5 note=null");
      assertThat(orders.advanceFenced(c, "o14", "PACKED", "SHIPPED", new FencingToken(6)).outcome()).isEqualTo(APPLIED);
    }
    assertThat(row("o14")).isEqualTo("SHIPPED v3 fence=6 note=null");
  }

  @Test
  void variantsWithoutTheirColumnAreRefused() throws SQLException {
    Transitions plain = idem.transitions(ORDERS).path(SHIPMENT).build();
    insert("o15", "PLACED");
    try (Connection c = ds.getConnection()) {
      assertThatThrownBy(() -> plain.updateAtVersion(c, "o15", 1, Map.of("note", "x")))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("versionColumn");
      assertThatThrownBy(() -> plain.writeFenced(c, "o15", FencingToken.FIRST, Map.of("note", "x")))
          .isInstanceOf(IllegalStateException.class).hasMessageContaining("fenceColumn");
      // Without a version column a step moves the status and leaves the version alone.
      assertThat(plain.step(c, "o15", "PLACED", "PACKED"))
          .isEqualTo(new TransitionResultValue(APPLIED, true, Optional.of("PACKED"), OptionalLong.empty()));
    }
    assertThat(row("o15")).isEqualTo("PACKED v1 fence=null note=null");
  }

  @Test
  void worksOnAnEnumStatusAndAUuidIdInThePublicSchema() throws SQLException {
    if (mariadb()) { // ENUM is a column type there, UUID one since 10.7; the table is in the connection's database
      sql("CREATE TABLE parcels (pid uuid PRIMARY KEY, state ENUM('PLACED', 'PACKED', 'SHIPPED', 'DELIVERED',"
          + " 'CANCELLED') NOT NULL, rev bigint NOT NULL DEFAULT 0)");
    } else {
      sql("CREATE TYPE parcel_state AS ENUM ('PLACED', 'PACKED', 'SHIPPED', 'DELIVERED', 'CANCELLED')");
      sql("CREATE TABLE parcels (pid uuid PRIMARY KEY, state parcel_state NOT NULL, rev bigint NOT NULL DEFAULT 0)");
    }
    UUID id = UUID.randomUUID();
    sql("INSERT INTO parcels VALUES ('" + id + "', 'PLACED', 0)");
    Transitions parcels = idem.transitions("parcels").idColumn("pid").statusColumn("state").versionColumn("rev")
        .path(SHIPMENT).build();
    Map<String, Object> seen = new HashMap<>();
    try (Connection c = ds.getConnection()) {
      seen.put("first", parcels.advance(c, id, "PLACED", "PACKED"));
      seen.put("repeat", parcels.advance(c, id, "PLACED", "PACKED"));
      seen.put("as text", parcels.advance(c, id.toString(), "PACKED", "SHIPPED"));
    }
    assertThat(seen).containsEntry("first", APPLIED).containsEntry("repeat", ALREADY_DONE)
        .containsEntry("as text", APPLIED);
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT " + (mariadb() ? "state" : "state::text") + ", rev FROM parcels")) {
      rs.next();
      assertThat(rs.getString(1) + " " + rs.getLong(2)).isEqualTo("SHIPPED 2");
    }
  }

  @Test
  void aBlankPaddedCharStatusIsReadWithoutItsPadding() throws SQLException {
    // char(n) values come back padded to n; a repeat must still be recognised, not a CONFLICT
    sql("CREATE TABLE crates (id varchar(10) PRIMARY KEY, status char(10) NOT NULL)");
    sql("INSERT INTO crates VALUES ('c1', 'PLACED')");
    Transitions crates = idem.transitions("crates").path(SHIPMENT).build();
    try (Connection c = ds.getConnection()) {
      assertThat(crates.step(c, "c1", "PLACED", "PACKED"))
          .isEqualTo(new TransitionResultValue(APPLIED, true, Optional.of("PACKED"), OptionalLong.empty()));
      assertThat(crates.step(c, "c1", "PLACED", "PACKED"))
          .isEqualTo(new TransitionResultValue(ALREADY_DONE, true, Optional.of("PACKED"), OptionalLong.empty()));
      assertThat(crates.step(c, "c1", "SHIPPED", "DELIVERED").outcome()).isEqualTo(CONFLICT);
    }
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT count(*), min(status) FROM crates")) {
      rs.next();
      // MariaDB strips a char(n)'s padding when read (unless PAD_CHAR_TO_FULL_LENGTH): nothing to drop there
      assertThat(rs.getLong(1) + " " + rs.getString(2)).isEqualTo(mariadb() ? "1 PACKED" : "1 PACKED    ");
    }
  }

  /**
   * Copies racing on real connections at each isolation level: a step, an edit at one version and
   * fenced writes each apply once, and a stale token never overwrites a later one's write. In
   * idem's own transactions every level (PostgreSQL's 40001 at REPEATABLE READ and SERIALIZABLE is
   * run again within the retry budget); in the callers' own transactions where no 40001 comes
   * (MariaDB at every level: its UPDATE waits and reads the newest row, then the locking read sees it).
   */
  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ",
      "TRANSACTION_SERIALIZABLE"})
  void copiesRacingAtEveryIsolationLevelApplyOnce(String isolation) throws Exception {
    DataSource racers = Racers.pool(db, 6, isolation);
    Transitions t = Idem.builder(racers).build().transitions(ORDERS).versionColumn("version").fenceColumn("fence")
        .path(SHIPMENT).build();
    boolean noSerializationFailures = mariadb()
        || List.of("TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED").contains(isolation);
    for (int round = 0; round < 4; round++) {
      String id = "iso-" + isolation.substring("TRANSACTION_".length()) + "-" + round;
      insert(id, "PLACED");
      List<Outcome> steps = Race.together(6, i -> t.advance(id, "PLACED", "PACKED"));
      assertThat(steps).as(id).containsOnlyOnce(APPLIED).containsOnly(APPLIED, ALREADY_DONE);
      List<Outcome> ownSteps = Race.together(6, i -> {
        if (!noSerializationFailures) {
          return t.advance(id, "PACKED", "SHIPPED");
        }
        try (Connection c = racers.getConnection()) {
          c.setAutoCommit(false);
          Outcome o = t.advance(c, id, "PACKED", "SHIPPED");
          c.commit();
          return o;
        }
      });
      assertThat(ownSteps).as(id).containsOnlyOnce(APPLIED).containsOnly(APPLIED, ALREADY_DONE);
      List<Outcome> edits = Race.together(6, i -> t.updateAtVersion(id, 3, Map.of("note", "editor-" + i)).outcome());
      assertThat(edits).as(id).containsOnlyOnce(APPLIED).containsOnly(APPLIED, CONFLICT);
      assertThat(row(id)).as(id).startsWith("SHIPPED v4 fence=null note=editor-");
      // Workers with tokens 1 to 6 write their results at once: 6's is never refused and never
      // overwritten, whatever order the others come in.
      List<String> fenced = Race.together(6, i -> {
        try {
          return t.writeFenced(id, new FencingToken(i + 1), Map.of("note", "by " + (i + 1))).outcome().name();
        } catch (StaleFenceException stale) {
          return "STALE";
        }
      });
      assertThat(fenced.get(5)).as(id).isEqualTo("APPLIED");
      assertThat(fenced).as(id).isSubsetOf("APPLIED", "STALE"); // all may apply, if they come in token order
      long applied = fenced.stream().filter("APPLIED"::equals).count();
      assertThat(row(id)).as(id).isEqualTo("SHIPPED v" + (4 + applied) + " fence=6 note=by 6");
    }
  }

  // ---------------------------------------------------------------- events

  @Test
  void everyStepIsOneEventCarryingItsOutcomeAndTheRowAsTheDatabaseHasIt() throws SQLException {
    String id = "caf\u00e9 order #7"; // a row id that no IdempotencyKey would take
    insert(id, "PLACED");
    String[][] walk = {{"PLACED", "PACKED"}, {"PLACED", "PACKED"}, {"PACKED", "SHIPPED"}, {"SHIPPED", "DELIVERED"},
        {"PLACED", "PACKED"}};
    try (Connection c = ds.getConnection()) {
      for (String[] step : walk) {
        int before = eventsOf(id).size();
        Outcome returned = watched.advance(c, id, step[0], step[1]);
        List<IdemEvent> now = eventsOf(id);
        assertThat(now).as("one event per call").hasSize(before + 1);
        IdemEvent.Transition event = (IdemEvent.Transition) now.get(before);
        assertThat(event.outcome()).isEqualTo(returned);
        assertThat(event.from()).contains(step[0]);
        assertThat(event.to()).contains(step[1]);
        // What the event says the row is, the table says too.
        assertThat(row(id)).startsWith(event.state().orElseThrow() + " v" + event.version().orElseThrow() + " ");
      }
    }
    assertThat(outcomesOf(id)).containsExactly(APPLIED, ALREADY_DONE, APPLIED, APPLIED, ALREADY_DONE);
    assertThat(eventsOf(id).get(0)).isEqualTo(stepEvent(id, "PLACED", "PACKED", APPLIED, true, "PACKED", 2L));
    assertThat(eventsOf(id).get(4)).isEqualTo(stepEvent(id, "PLACED", "PACKED", ALREADY_DONE, true, "DELIVERED", 4L));
    assertThat(row(id)).isEqualTo("DELIVERED v4 fence=null note=null");
  }

  @Test
  void aConflictTellsTheOperatorWhereTheRowIsAndLeavesItThere() throws SQLException {
    insert("ev-cancelled", "CANCELLED");
    insert("ev-early", "PLACED");
    try (Connection c = ds.getConnection()) {
      assertThat(watched.advance(c, "ev-cancelled", "PLACED", "PACKED")).isEqualTo(CONFLICT);
      assertThat(watched.advance(c, "ev-early", "PACKED", "SHIPPED")).isEqualTo(CONFLICT);
      assertThat(watched.step(c, "ev-missing", "PLACED", "PACKED").outcome()).isEqualTo(CONFLICT);
    }
    assertThat(eventsOf("ev-cancelled"))
        .containsExactly(stepEvent("ev-cancelled", "PLACED", "PACKED", CONFLICT, true, "CANCELLED", 1L));
    assertThat(eventsOf("ev-early"))
        .containsExactly(stepEvent("ev-early", "PACKED", "SHIPPED", CONFLICT, true, "PLACED", 1L));
    assertThat(eventsOf("ev-missing"))
        .containsExactly(stepEvent("ev-missing", "PLACED", "PACKED", CONFLICT, false, null, null));
    assertThat(row("ev-cancelled")).isEqualTo("CANCELLED v1 fence=null note=null");
    assertThat(row("ev-early")).isEqualTo("PLACED v1 fence=null note=null");
    assertThat(row("ev-missing")).isEqualTo("none");
  }

  @Test
  void editsAndFencedWritesReportTheirOutcomesAndAStaleTokenIsCountedAsARefusal() throws SQLException {
    insert("ev-run", "PLACED");
    try (Connection c = ds.getConnection()) {
      assertThat(watched.updateAtVersion(c, "ev-run", 1, Map.of("note", "gift wrap")).outcome()).isEqualTo(APPLIED);
      assertThat(watched.updateAtVersion(c, "ev-run", 1, Map.of("note", "no wrap")).outcome()).isEqualTo(CONFLICT);
      assertThat(watched.writeFenced(c, "ev-run", new FencingToken(2), Map.of("note", "by 2")).outcome())
          .isEqualTo(APPLIED);
      assertThatThrownBy(() -> watched.writeFenced(c, "ev-run", new FencingToken(1), Map.of("note", "by 1")))
          .isInstanceOf(StaleFenceException.class);
      assertThatThrownBy(() -> watched.advanceFenced(c, "ev-run", "PLACED", "PACKED", new FencingToken(1)))
          .isInstanceOf(StaleFenceException.class);
      assertThat(watched.advanceFenced(c, "ev-run", "PLACED", "PACKED", new FencingToken(2)).outcome())
          .isEqualTo(APPLIED);
      assertThat(watched.writeFenced(c, "ev-no-run", new FencingToken(3), Map.of("note", "x")).outcome())
          .isEqualTo(CONFLICT);
    }
    assertThat(eventsOf("ev-run")).containsExactly(
        editEvent("ev-run", APPLIED, true, "PLACED", 2L),
        editEvent("ev-run", CONFLICT, true, "PLACED", 2L), // another editor moved it to version 2
        editEvent("ev-run", APPLIED, true, "PLACED", 3L),
        new IdemEvent.StaleFence("transitions:" + ORDERS, ORDERS + "/ev-run", 1, 2),
        new IdemEvent.StaleFence("transitions:" + ORDERS, ORDERS + "/ev-run", 1, 2),
        stepEvent("ev-run", "PLACED", "PACKED", APPLIED, true, "PACKED", 4L));
    assertThat(eventsOf("ev-no-run")).containsExactly(editEvent("ev-no-run", CONFLICT, false, null, null));
    // The refused writes wrote nothing: the note and the fence are token 2's.
    assertThat(row("ev-run")).isEqualTo("PACKED v4 fence=2 note=by 2");
  }

  @Test
  void anAppliedStepIsReportedInsideTheCallersTransactionAndARollbackDoesNotRetractIt() throws SQLException {
    insert("ev-rolled-back", "PLACED");
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThat(watched.advance(c, "ev-rolled-back", "PLACED", "PACKED")).isEqualTo(APPLIED);
      // Reported as soon as it is decided: before the caller's transaction ends, so not committed.
      assertThat(outcomesOf("ev-rolled-back")).containsExactly(APPLIED);
      assertThat(row("ev-rolled-back")).isEqualTo("PLACED v1 fence=null note=null");
      c.rollback();
    }
    assertThat(row("ev-rolled-back")).isEqualTo("PLACED v1 fence=null note=null");
    assertThat(outcomesOf("ev-rolled-back")).containsExactly(APPLIED);
    // The redelivery applies it, for real this time, and is reported again.
    Outcome redelivered = idem.inTransaction(tx -> watched.advance(tx.connection(), "ev-rolled-back", "PLACED", "PACKED"));
    assertThat(redelivered).isEqualTo(APPLIED);
    assertThat(outcomesOf("ev-rolled-back")).containsExactly(APPLIED, APPLIED);
    assertThat(row("ev-rolled-back")).isEqualTo("PACKED v2 fence=null note=null");
  }

  @Test
  void aListenerThatThrowsBreaksNeitherAStepNorARefusal() throws SQLException {
    List<IdemEvent> reached = new CopyOnWriteArrayList<>();
    Idem broken = Idem.builder(ds).listener(new IdemListener() {
      @Override
      public void onTransition(IdemEvent.Transition event) {
        reached.add(event);
        throw new IllegalStateException("metrics backend down");
      }

      @Override
      public void onStaleFence(IdemEvent.StaleFence event) {
        reached.add(event);
        throw new IllegalStateException("metrics backend down");
      }
    }).build();
    Transitions t = broken.transitions(ORDERS).fenceColumn("fence").versionColumn("version").path(SHIPMENT)
        .build();
    insert("ev-broken", "PLACED");
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThat(t.advanceFenced(c, "ev-broken", "PLACED", "PACKED", new FencingToken(3)).outcome()).isEqualTo(APPLIED);
      // The caller gets the refusal it must act on, not the listener's failure.
      assertThatThrownBy(() -> t.advanceFenced(c, "ev-broken", "PACKED", "SHIPPED", new FencingToken(2)))
          .isInstanceOf(StaleFenceException.class);
      c.commit();
    }
    assertThat(reached).hasSize(2);
    assertThat(row("ev-broken")).isEqualTo("PACKED v2 fence=3 note=null");
  }
}
