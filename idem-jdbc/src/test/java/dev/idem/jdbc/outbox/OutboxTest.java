package dev.idem.jdbc.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.Idem;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;

@IdemTest(schema = "obx", poolSize = 4)
class OutboxTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool, Idem inObx) {
    db = database;
    ds = pool;
    idem = inObx;
  }

  static boolean mariadb() {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  /**
   * The outbox table in schema obx: on MariaDB a database of the class's own standing for it,
   * named by {@code idem.schema()}.
   */
  static String outboxTable() {
    return idem.schema() + ".idem_outbox";
  }

  static long rows(String where) throws SQLException {
    try (Connection c = ds.getConnection()) {
      return rows(c, where);
    }
  }

  /** The outbox's rows where {@code where} holds, as {@code c} sees them. */
  static long rows(Connection c, String where) throws SQLException {
    try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT count(*) FROM " + outboxTable() + " WHERE " + where)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  /** A header column as stored: PostgreSQL's text[], MariaDB's JSON array (read with Jackson, not idem's reader). */
  static String[] headerColumn(ResultSet rs, int column) throws Exception {
    return mariadb() ? new ObjectMapper().readValue(rs.getString(column), String[].class) : (String[]) rs.getArray(column).getArray();
  }

  /** The id column: PostgreSQL's uuid, MariaDB's CHAR(36). */
  static UUID idColumn(ResultSet rs, int column) throws SQLException {
    return mariadb() ? UUID.fromString(rs.getString(column)) : rs.getObject(column, UUID.class);
  }

  @Test
  void enqueueWritesTheMessageInTheCallersTransactionWithAUuidV7() throws Exception {
    NewMessage m = NewMessage.of("orders.shipped", "{\"order\":42}".getBytes(StandardCharsets.UTF_8))
        .withAggregateKey("order-42").withHeader("type", "OrderShipped").withHeader("trace", "t-1");
    UUID id = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(), m));
    assertThat(id.version()).isEqualTo(7);
    assertThat(id.variant()).isEqualTo(2);
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT topic, aggregate_key, payload, header_names, header_values, status, attempts"
            + " FROM " + outboxTable() + " WHERE id = '" + id + "'")) {
      assertThat(rs.next()).isTrue();
      assertThat(rs.getString(1)).isEqualTo("orders.shipped");
      assertThat(rs.getString(2)).isEqualTo("order-42");
      assertThat(new String(rs.getBytes(3), StandardCharsets.UTF_8)).isEqualTo("{\"order\":42}");
      assertThat(headerColumn(rs, 4)).containsExactly("type", "trace");
      assertThat(headerColumn(rs, 5)).containsExactly("OrderShipped", "t-1");
      assertThat(rs.getString(6)).isEqualTo("P");
      assertThat(rs.getInt(7)).isZero();
    }
  }

  @Test
  void aRolledBackTransactionLeavesNoMessage() throws Exception {
    long before = rows("topic = 'rolled.back'");
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      idem.outbox().enqueue(c, NewMessage.of("rolled.back", new byte[] {1}));
      idem.outbox().enqueueAll(c, List.of(NewMessage.of("rolled.back", new byte[] {2})));
      assertThat(rows("topic = 'rolled.back'")).isEqualTo(before); // not visible before commit
      c.rollback();
      c.setAutoCommit(true);
    }
    assertThat(rows("topic = 'rolled.back'")).isEqualTo(before);
  }

  static NewMessage message(String topic, int i) {
    return NewMessage.of(topic, ("m" + i).getBytes(StandardCharsets.UTF_8));
  }

  static List<NewMessage> batchOf(String topic, int n) {
    List<NewMessage> batch = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      batch.add(message(topic, i));
    }
    return batch;
  }

  /** The payloads of {@code topic}'s rows by id, as committed. */
  static Map<UUID, String> payloadsById(String topic) throws SQLException {
    Map<UUID, String> rows = new HashMap<>();
    try (Connection c = ds.getConnection(); PreparedStatement ps = c.prepareStatement("SELECT id, payload FROM " + outboxTable() + " WHERE topic = ?")) {
      ps.setString(1, topic);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          rows.put(idColumn(rs, 1), new String(rs.getBytes(2), StandardCharsets.UTF_8));
        }
      }
    }
    return rows;
  }

  @Test
  void enqueueAllWritesEachMessageAsItsOwnRowWithIdsMintedInListOrder() throws Exception {
    List<NewMessage> order = List.of(
        NewMessage.of("shop.order-placed", "{\"order\":7}".getBytes(StandardCharsets.UTF_8)).withAggregateKey("order-7").withHeader("type", "OrderPlaced"),
        NewMessage.of("payments.requested", "{\"amount\":4000}".getBytes(StandardCharsets.UTF_8)).withAggregateKey("order-7")
            .withHeader("type", "PaymentRequested").withHeader("trace", "t-7").withHeader("tenant", "shop-42"),
        NewMessage.of("emails.requested", new byte[0]));
    List<UUID> ids = idem.inTransaction(tx -> idem.outbox().enqueueAll(tx.connection(), order));
    assertThat(ids).hasSize(3).doesNotHaveDuplicates();
    assertThat(ids).allSatisfy(id -> assertThat(id.version()).isEqualTo(7));
    assertThat(ids.get(0)).isLessThan(ids.get(1));
    assertThat(ids.get(1)).isLessThan(ids.get(2));
    assertThatThrownBy(() -> ids.add(UUID.randomUUID())).isInstanceOf(UnsupportedOperationException.class);
    for (int i = 0; i < order.size(); i++) {
      NewMessage m = order.get(i);
      try (Connection c = ds.getConnection(); Statement st = c.createStatement();
          ResultSet rs = st.executeQuery("SELECT topic, aggregate_key, payload, header_names, header_values, status, attempts"
              + " FROM " + outboxTable() + " WHERE id = '" + ids.get(i) + "'")) {
        assertThat(rs.next()).as("row of messages[%d]", i).isTrue();
        assertThat(rs.getString(1)).isEqualTo(m.topic());
        assertThat(rs.getString(2)).isEqualTo(m.aggregateKey());
        assertThat(rs.getBytes(3)).isEqualTo(m.payload());
        assertThat(headerColumn(rs, 4)).containsExactlyElementsOf(m.headers().keySet());
        assertThat(headerColumn(rs, 5)).containsExactlyElementsOf(m.headers().values());
        assertThat(rs.getString(6)).isEqualTo("P");
        assertThat(rs.getInt(7)).isZero();
        assertThat(rs.next()).isFalse();
      }
    }
  }

  @Test
  void enqueueAllWritesEveryMessageOnceAtAnySizeAndThroughEachOverload() throws Exception {
    // around the rows a statement takes, so that batches of one, one full and several statements are written
    int max = Outbox.MAX_ROWS_PER_INSERT;
    for (int n : new int[] {1, 2, max - 1, max, max + 1, 2 * max, 2 * max + 1, 250}) {
      String topic = "sizes-" + n;
      List<UUID> ids = idem.inTransaction(tx -> idem.outbox().enqueueAll(tx.connection(), batchOf(topic, n)));
      assertThat(ids).hasSize(n).isSorted().doesNotHaveDuplicates();
      Map<UUID, String> rows = payloadsById(topic);
      assertThat(rows).as("rows of a batch of %d", n).hasSize(n);
      for (int i = 0; i < n; i++) {
        assertThat(rows.get(ids.get(i))).as("messages[%d] of %d", i, n).isEqualTo("m" + i);
      }
    }
    List<UUID> byConnection;
    List<UUID> byDsl;
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      byConnection = idem.outbox().enqueueAll(c, batchOf("by-connection", 40));
      byDsl = idem.outbox().enqueueAll(c, batchOf("by-dsl", 3));
      assertThat(rows("topic IN ('by-connection', 'by-dsl')")).isZero(); // not visible before commit
      c.commit();
      c.setAutoCommit(true);
    }
    assertThat(payloadsById("by-connection").keySet()).containsExactlyInAnyOrderElementsOf(byConnection);
    assertThat(payloadsById("by-dsl").keySet()).containsExactlyInAnyOrderElementsOf(byDsl);
    assertThat(byConnection.get(39)).isLessThan(byDsl.get(0)); // minted in call order
  }

  @Test
  void aRolledBackTransactionLeavesNoneOfItsBatch() throws Exception {
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      idem.outbox().enqueueAll(c, batchOf("batch.rolled.back", 3));
      idem.outbox().enqueueAll(c, batchOf("batch.rolled.back", 2 * Outbox.MAX_ROWS_PER_INSERT + 5));
      c.rollback();
      c.setAutoCommit(true);
    }
    assertThatThrownBy(() -> idem.useTransaction(tx -> {
      idem.outbox().enqueueAll(tx.connection(), batchOf("batch.rolled.back", 50));
      throw new IllegalStateException("business rule broken");
    })).hasMessage("business rule broken");
    assertThat(rows("topic = 'batch.rolled.back'")).isZero();
  }

  @Test
  void badBatchInputIsRefusedByNameBeforeAnythingIsWritten() throws Exception {
    List<NewMessage> withHole = Arrays.asList(message("bad.batch", 0), message("bad.batch", 1), null, message("bad.batch", 3));
    assertThatThrownBy(() -> idem.useTransaction(tx -> idem.outbox().enqueueAll(tx.connection(), null)))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("messages must not be null");
    assertThatThrownBy(() -> idem.outbox().enqueueAll((Connection) null, List.of(message("bad.batch", 0))))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("callerTx");
    // with no transaction open on this thread, the form without a connection refuses: the message would commit alone
    assertThatThrownBy(() -> idem.outbox().enqueueAll(List.of(message("bad.batch", 0))))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("no transaction is open on this thread");
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      assertThatThrownBy(() -> idem.outbox().enqueueAll(c, withHole))
          .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("messages[2] must not be null");
      assertThatThrownBy(() -> idem.outbox().enqueueAll(c, withHole))
          .isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith("messages[2] must not be null");
      // nothing reached the database: the caller's transaction is intact and commits its own work
      UUID mine = idem.outbox().enqueue(c, message("bad.batch.caller", 0));
      c.commit();
      c.setAutoCommit(true);
      assertThat(payloadsById("bad.batch.caller")).containsOnlyKeys(mine);
    }
    try (Connection c = ds.getConnection()) {
      assertThat(c.getAutoCommit()).isTrue();
      // a connection in auto-commit is refused before the messages are looked at: they would commit alone
      assertThatThrownBy(() -> idem.outbox().enqueueAll(c, List.of(message("bad.batch", 0))))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("auto-commit");
      assertThatThrownBy(() -> idem.outbox().enqueue(c, message("bad.batch", 0)))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("auto-commit");
    }
    assertThat(rows("topic = 'bad.batch'")).isZero();
  }

  @Test
  void anEmptyBatchWritesNothingAndReturnsNoIds() throws Exception {
    long before = rows("true");
    List<UUID> none = idem.inTransaction(tx -> idem.outbox().enqueueAll(tx.connection(), List.of()));
    assertThat(none).isEmpty();
    assertThat(rows("true")).isEqualTo(before);
  }

  /** A connection in auto-commit is no transaction to join: the batch is refused and nothing is written. */
  @Test
  void aBatchInAutoCommitIsRefusedAndWritesNothing() throws Exception {
    int n = 3 * Outbox.MAX_ROWS_PER_INSERT + 1;
    try (Connection c = ds.getConnection()) {
      assertThat(c.getAutoCommit()).isTrue();
      assertThatThrownBy(() -> idem.outbox().enqueueAll(c, batchOf("autocommit.batch", n)))
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("auto-commit");
      assertThat(c.getAutoCommit()).isTrue();
    }
    assertThat(rows("topic = 'autocommit.batch'")).isZero();
  }

  /**
   * A row the database refuses (a trigger stands in for any failure: a NUL byte in a topic, a full
   * disk). PostgreSQL aborts the caller's transaction; MariaDB keeps it, and idem rolls the batch
   * back to its savepoint: nothing of the batch is left in the transaction, the caller's own row is.
   */
  @Test
  void aRowTheDatabaseRefusesLeavesNoPartOfItsBatch() throws Exception {
    String schema = idem.schema();
    if (mariadb()) {
      db.execute("CREATE TRIGGER " + schema + ".refuse_poison BEFORE INSERT ON " + outboxTable() + " FOR EACH ROW"
          + " BEGIN IF NEW.topic = 'poison' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'poison refused'; END IF; END");
    } else {
      db.execute("CREATE FUNCTION obx.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
          + " IF NEW.topic = 'poison' THEN RAISE EXCEPTION 'poison refused'; END IF; RETURN NEW; END $$;"
          + " CREATE TRIGGER refuse_poison BEFORE INSERT ON obx.idem_outbox FOR EACH ROW EXECUTE FUNCTION obx.refuse_poison()");
    }
    try {
      int n = 2 * Outbox.MAX_ROWS_PER_INSERT + 10;
      List<NewMessage> late = new ArrayList<>(batchOf("partial", n));
      late.set(n - 3, NewMessage.of("poison", new byte[0])); // in the last statement, after two were written
      List<NewMessage> small = new ArrayList<>(batchOf("partial", 5));
      small.set(4, NewMessage.of("poison", new byte[0]));

      // in the caller's transaction: the transaction is aborted, neither the batch nor the caller's own row commits
      try (Connection c = ds.getConnection()) {
        c.setAutoCommit(false);
        idem.outbox().enqueue(c, message("partial.caller", 0));
        assertThatThrownBy(() -> idem.outbox().enqueueAll(c, late))
            .isInstanceOf(DataAccessException.class).hasMessageContaining("poison refused").hasMessageContaining("batch of " + n);
        if (mariadb()) {
          // the transaction goes on: the two statements of the batch written before the refused one are undone in it
          assertThat(rows(c, "topic IN ('partial', 'poison')")).isZero();
          assertThat(rows(c, "topic = 'partial.caller'")).isEqualTo(1);
          c.rollback(); // what a caller does after the exception, as on PostgreSQL
        } else {
          assertThatThrownBy(() -> idem.outbox().enqueue(c, message("partial.caller", 1)))
              .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("its transaction is aborted");
          try {
            c.commit();
          } catch (SQLException expected) {
            // pgjdbc may report the rollback the server did instead of the commit
          }
        }
        c.setAutoCommit(true);
      }
      // through idem's own transaction
      assertThatThrownBy(() -> idem.useTransaction(tx -> idem.outbox().enqueueAll(tx.connection(), small))).hasMessageContaining("poison refused");
      // joined through idem's transaction open on this thread, the form without a connection
      assertThatThrownBy(() -> idem.useTransaction(tx -> idem.outbox().enqueueAll(late))).hasMessageContaining("poison refused");
      assertThat(rows("topic IN ('partial', 'partial.caller', 'poison')")).isZero();
    } finally {
      db.execute(mariadb() ? "DROP TRIGGER " + schema + ".refuse_poison"
          : "DROP TRIGGER refuse_poison ON obx.idem_outbox; DROP FUNCTION obx.refuse_poison()");
    }
  }

  @Test
  void aNotifyingBatchWakesListenersOncePerTransactionAtCommit() throws Exception {
    Assumptions.assumeTrue(!mariadb(), "LISTEN/NOTIFY is PostgreSQL's; MariaDB's form: withoutNotifyOnMariaDb...");
    Outbox notifying = idem.outbox().notifying();
    assertThat(notifying.notifying()).isSameAs(notifying);
    assertThat(idem.outbox().notifying()).isSameAs(notifying);
    try (Connection listener = db.connect(); Statement st = listener.createStatement()) {
      st.execute("LISTEN \"" + Outbox.channel(idem.schema()) + "\"");
      PGConnection pg = listener.unwrap(PGConnection.class);
      List<UUID> ids;
      try (Connection c = ds.getConnection()) {
        c.setAutoCommit(false);
        ids = notifying.enqueueAll(c, batchOf("notifying.batch", 2 * Outbox.MAX_ROWS_PER_INSERT + 1));
        notifying.enqueue(c, message("notifying.batch", 999));
        notifying.enqueueAll(c, batchOf("notifying.batch", 2));
        assertThat(pg.getNotifications(300)).as("nothing before commit").isNullOrEmpty();
        c.commit();
        c.setAutoCommit(true);
      }
      var got = pg.getNotifications(5000);
      assertThat(got).hasSize(1);
      assertThat(got[0].getName()).isEqualTo(Outbox.channel(idem.schema()));
      assertThat(pg.getNotifications(300)).as("one per transaction").isNullOrEmpty();
      assertThat(payloadsById("notifying.batch")).hasSize(ids.size() + 3).containsKeys(ids.toArray(new UUID[0]));
    }
  }

  @Test
  void aSchemaNameTooLongForAPlainChannelNameStillNotifiesAndWakesAListeningRelay() throws Exception {
    Assumptions.assumeTrue(!mariadb(), "NOTIFY channels are PostgreSQL's");
    String schema = "obx_long_" + "x".repeat(54); // 63 characters, the longest schema name there is
    Idem longIdem = Idem.builder(ds).schema(schema).build();
    IdemFlyway.migrate(ds, schema);
    String channel = Outbox.channel(longIdem.schema());
    assertThat(channel.getBytes(StandardCharsets.UTF_8)).as("PostgreSQL's limit for a channel name").hasSizeLessThanOrEqualTo(63);
    assertThat(Outbox.channel(schema.substring(0, 62) + "y")).isNotEqualTo(channel);
    // short enough: the name is the one relays of earlier versions LISTEN on
    assertThat(Outbox.channel(idem.schema())).isEqualTo("obx.idem_outbox");

    List<UUID> published = new CopyOnWriteArrayList<>();
    try (Relay relay = longIdem.relay(m -> published.add(m.id())).listen(true).pollInterval(Duration.ofMinutes(10)).build()) {
      relay.start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
      while (db.count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'") == 0) {
        assertThat(System.nanoTime()).as("the relay LISTENs").isLessThan(deadline);
        Thread.sleep(10);
      }
      UUID id = longIdem.inTransaction(tx -> longIdem.outbox().notifying().enqueue(tx.connection(), message("long.schema", 1)));
      String sent = "SELECT count(*) FROM " + schema + ".idem_outbox WHERE id = '" + id + "' AND status = 'S'";
      while (db.count(sent) == 0) {
        assertThat(System.nanoTime()).as("woken by the NOTIFY on the same channel, not by the 10 minute poll").isLessThan(deadline);
        Thread.sleep(10);
      }
      assertThat(published).containsExactly(id);
    }
  }

  /**
   * MariaDB has no LISTEN/NOTIFY: {@code notifying()} is the outbox itself, writing the same rows,
   * and a relay built to listen polls at its interval instead, publishing every message.
   */
  @Test
  void withoutNotifyOnMariaDbTheOutboxIsItselfAndAListeningRelayFindsMessagesByPolling() throws Exception {
    Assumptions.assumeTrue(mariadb(), "PostgreSQL notifies: aNotifyingBatchWakesListenersOncePerTransactionAtCommit");
    assertThat(idem.outbox().notifying()).isSameAs(idem.outbox());
    List<UUID> published = new CopyOnWriteArrayList<>();
    List<UUID> ids;
    try (Relay relay = idem.relay(m -> {
      if (m.topic().equals("polled.batch")) {
        published.add(m.id());
      }
    }).listen(true).pollInterval(Duration.ofMillis(100)).build()) {
      relay.start();
      ids = idem.inTransaction(tx -> idem.outbox().notifying().enqueueAll(tx.connection(), batchOf("polled.batch", 3)));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (rows("topic = 'polled.batch' AND status = 'S'") < 3) {
        assertThat(System.nanoTime()).as("published by polling").isLessThan(deadline);
        Thread.sleep(10);
      }
    }
    assertThat(published).containsExactlyInAnyOrderElementsOf(ids);
  }

  /**
   * Headers of any text (quotes, backslashes, control characters, characters outside the BMP, empty
   * values) are stored as they are (PostgreSQL's text[], MariaDB's JSON arrays) and handed to the
   * publisher as they went in, in their order.
   */
  @Test
  void headersOfAnyTextAreStoredAndPublishedAsTheyWentIn() throws Exception {
    Map<String, String> headers = new java.util.LinkedHashMap<>();
    headers.put("quote\"", "a \"quoted\" value");
    headers.put("back\\slash", "C:\\dir\\");
    headers.put("controls", "line\nbreak\ttab\r\u0001\u001f\u007f");
    headers.put("emoji-\uD83D\uDE00", "caf\u00e9 \u4e2d\u6587 \uD83C\uDF89");
    headers.put("json", "[\"not\", \"an\", \"array\"] {}");
    headers.put("empty", "");
    NewMessage m = NewMessage.of("headers.text", new byte[] {1});
    for (Map.Entry<String, String> h : headers.entrySet()) {
      m = m.withHeader(h.getKey(), h.getValue());
    }
    NewMessage message = m;
    UUID id = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(), message));
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT header_names, header_values FROM " + outboxTable() + " WHERE id = '" + id + "'")) {
      assertThat(rs.next()).isTrue();
      assertThat(headerColumn(rs, 1)).containsExactlyElementsOf(headers.keySet());
      assertThat(headerColumn(rs, 2)).containsExactlyElementsOf(headers.values());
    }
    List<Map<String, String>> published = new CopyOnWriteArrayList<>();
    Relay relay = idem.relay(sent -> {
      if (sent.id().equals(id)) {
        published.add(sent.headers());
      }
    }).build();
    while (relay.runOnce() > 0) {
      // until every pending message of the class's outbox went out, this one among them
    }
    assertThat(published).hasSize(1);
    assertThat(published.get(0)).containsExactlyEntriesOf(headers);
  }

  @Test
  void idsFromOneJvmStrictlyIncrease() {
    List<UUID> ids = new ArrayList<>();
    for (int i = 0; i < 20_000; i++) {
      ids.add(UuidV7.next());
    }
    for (int i = 1; i < ids.size(); i++) {
      assertThat(ids.get(i).compareTo(ids.get(i - 1))).isPositive();
      assertThat(ids.get(i).version()).isEqualTo(7);
    }
    long ms = ids.get(0).getMostSignificantBits() >>> 16;
    assertThat(ms).isBetween(System.currentTimeMillis() - 60_000, System.currentTimeMillis() + 60_000);
  }

  @Test
  void badInputIsRefusedAndWritesNothing() throws Exception {
    long before = rows("true");
    assertThatThrownBy(() -> NewMessage.of(null, new byte[0])).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("topic");
    assertThatThrownBy(() -> NewMessage.of(" ", new byte[0])).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("topic");
    assertThatThrownBy(() -> NewMessage.of("t", null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("payload");
    assertThatThrownBy(() -> NewMessage.of("t", new byte[0]).withHeader(null, "v")).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("header");
    assertThatThrownBy(() -> NewMessage.of("t", new byte[0]).withHeader("h", null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("header");
    assertThatThrownBy(() -> NewMessage.of("t", new byte[0]).withAggregateKey("")).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("aggregate key");
    assertThatThrownBy(() -> idem.useTransaction(tx -> idem.outbox().enqueue(tx.connection(), null)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("message");
    assertThatThrownBy(() -> idem.outbox().enqueue((Connection) null, NewMessage.of("t", new byte[0])))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("callerTx");
    assertThatThrownBy(() -> idem.operations().redrive(null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("id");
    assertThatThrownBy(() -> idem.relay(m -> {}).batchSize(0).build()).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("batchSize");
    assertThatThrownBy(() -> idem.relay(m -> {}).maxAttempts(0).build()).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxAttempts");
    assertThatThrownBy(() -> idem.relay(null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("publisher");
    assertThat(rows("true")).isEqualTo(before);
  }

  /**
   * Text PostgreSQL cannot store as given is refused when the message is built: a NUL would fail the
   * insert and abort the caller's business transaction with an error that names no field; an
   * unpaired surrogate would be written as "?" (a message to another topic); an aggregate key past
   * the index's entry limit would fail the insert. The longest allowed key goes in and out intact.
   */
  @Test
  void textTheDatabaseCannotStoreAsGivenIsRefusedWhenBuilt() throws Exception {
    byte[] p = {1};
    assertThatThrownBy(() -> NewMessage.of("orders\0", p)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("topic must not contain a NUL character (at index 6)");
    assertThatThrownBy(() -> NewMessage.of("ord\uD800ers", p)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("topic has an unpaired surrogate at index 3");
    assertThatThrownBy(() -> NewMessage.of("t", p).withHeader("tr\0ce", "v")).hasMessageContaining("header name");
    assertThatThrownBy(() -> NewMessage.of("t", p).withHeader("trace", "a\0b")).hasMessageContaining("value of header 'trace'");
    assertThatThrownBy(() -> NewMessage.of("t", p).withAggregateKey("order-\uDC00")).hasMessageContaining("aggregate key");
    assertThatThrownBy(() -> NewMessage.of("t", p).withAggregateKey("k".repeat(NewMessage.MAX_AGGREGATE_KEY_BYTES + 1)))
        .hasMessageContaining("aggregate key is 2001 bytes");

    String emoji = "orders-\uD83D\uDE00"; // a surrogate pair is fine
    if (mariadb()) {
      // MariaDB's columns are shorter (VARCHAR(1024) and (512), in characters): a longer text is refused
      // at enqueue, before the insert a strict server would fail and a lax one would cut short
      // 512 characters and 2,000 bytes in UTF-8 (four for each emoji): the longest key both limits admit
      String longestKey = "\uD83D\uDE00".repeat(496) + "k".repeat(16);
      String longestTopic = "t".repeat(Outbox.MARIADB_MAX_TOPIC_CHARS - 1) + "\u00e9";
      assertThatThrownBy(() -> idem.useTransaction(tx -> idem.outbox().enqueue(tx.connection(),
          NewMessage.of(emoji, p).withAggregateKey("k".repeat(513))))).isInstanceOf(IllegalArgumentException.class)
          .hasMessage("message: aggregate key is 513 characters, longer than the 512 idem_outbox.aggregate_key holds on MariaDB"
              + " (nothing was enqueued)");
      assertThatThrownBy(() -> idem.useTransaction(tx -> idem.outbox().enqueueAll(tx.connection(),
          List.of(NewMessage.of(emoji, p), NewMessage.of(longestTopic + "x", p))))).isInstanceOf(IllegalArgumentException.class)
          .hasMessageStartingWith("messages[1]: topic is 1025 characters");
      UUID id = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(), NewMessage.of(emoji, p).withAggregateKey(longestKey)));
      UUID id2 = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(), NewMessage.of(longestTopic, p)));
      assertThat(rows("id = '" + id + "' AND topic = '" + emoji + "' AND aggregate_key = '" + longestKey + "'")).isEqualTo(1);
      assertThat(rows("id = '" + id2 + "' AND topic = '" + longestTopic + "'")).isEqualTo(1);
      assertThat(rows("topic = '" + longestTopic + "x'")).isZero();
      return;
    }
    String longest = "\u00e9".repeat(NewMessage.MAX_AGGREGATE_KEY_BYTES / 2); // two bytes each in UTF-8
    UUID id = idem.inTransaction(tx -> idem.outbox().enqueue(tx.connection(), NewMessage.of(emoji, p).withAggregateKey(longest)));
    assertThat(rows("id = '" + id + "' AND topic = '" + emoji + "' AND aggregate_key = '" + longest + "'")).isEqualTo(1);
  }

  @Test
  void thePayloadIsCopied() {
    byte[] bytes = {1, 2, 3};
    NewMessage m = NewMessage.of("t", bytes);
    bytes[0] = 9;
    assertThat(m.payload()).containsExactly(1, 2, 3);
    assertThat(m.withHeader("a", "1").headers()).isEqualTo(Map.of("a", "1"));
    assertThat(m.headers()).isEmpty();

    // what a publisher is handed cannot change under it, nor can it change the message
    byte[] payload = {1, 2, 3};
    Map<String, String> headers = new java.util.LinkedHashMap<>(Map.of("a", "1"));
    OutboxMessage sent = new OutboxMessageValue(UUID.randomUUID(), "t", null, payload, headers, java.time.Instant.EPOCH, 1);
    payload[0] = 9;
    headers.put("b", "2");
    sent.payload()[1] = 9;
    assertThat(sent.payload()).containsExactly(1, 2, 3);
    assertThat(sent.headers()).isEqualTo(Map.of("a", "1"));
  }
}
