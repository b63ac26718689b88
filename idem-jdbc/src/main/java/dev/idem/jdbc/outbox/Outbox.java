package dev.idem.jdbc.outbox;

import static dev.idem.jdbc.internal.OutboxTable.*;

import dev.idem.internal.base.Require;
import dev.idem.internal.base.Sha256;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.Lineage;
import dev.idem.jdbc.tx.Tx;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReferenceArray;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Row6;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * The transactional outbox: {@link #enqueue} writes a message in the caller's own transaction, so
 * the message exists if and only if the caller's business change commits; {@link #enqueueAll}
 * writes several at once (an order placed: the order event, a payment request, an email request).
 * A {@link Relay} sends them afterwards.
 *
 * <p>Guarantees: the id is minted at enqueue (a time-ordered UUIDv7), never at send time, so every
 * send of the message carries the same id. A message is never dropped: it stays pending, sent (kept
 * for the relay's retention) or parked after too many failed attempts, where {@link
 * dev.idem.jdbc.ops.Operations#redrive(UUID) Operations.redrive} sends it again.
 *
 * <p>Does not guarantee: exactly-once delivery. The relay is at least once; receivers must absorb
 * copies by the message id (an {@link dev.idem.jdbc.inbox.Inbox} does).
 *
 * <p>On MariaDB the same, with these differences: a topic holds at most 1,024
 * characters and an aggregate key at most 512 (the columns' sizes there; a longer one is refused before
 * anything is written); a row the database refuses does not abort the caller's transaction, as
 * PostgreSQL does, so idem undoes its own statements and the caller must roll back (see {@link
 * #enqueueAll}); there is no {@code NOTIFY} ({@link #notifying()}); and {@link OutboxLayout#DEBEZIUM}
 * is refused (PostgreSQL only).
 *
 * <p>Thread-safe; holds nothing but its context and the statements it rendered.
 */
public final class Outbox {
  /**
   * Rows per {@code INSERT} of {@link #enqueueAll}: a batch up to this size is one statement (one
   * round trip); a larger one is several, in order. A multi-row {@code INSERT} measured faster
   * here than a JDBC batch of the one-row insert (the commit's flush taken out, median per
   * message: 10 messages a transaction 29 µs against 46; 1,000 a transaction 17 to 20 µs in
   * statements of 32 rows, 21 to 24 in statements of 100, against 34). Each row count up to this
   * bound is a statement text of its own, which pgjdbc prepares on the server once a connection
   * has used it five times (a 100-row one holds about 400 KB there): the bound keeps that small.
   */
  static final int MAX_ROWS_PER_INSERT = 32;

  /** The longest topic on MariaDB, in characters: {@code idem_outbox.topic} is a {@code VARCHAR(1024)} there. */
  static final int MARIADB_MAX_TOPIC_CHARS = 1024;

  /**
   * The longest aggregate key on MariaDB, in characters: {@code idem_outbox.aggregate_key} is a
   * {@code VARCHAR(512)} there, so that the index ordered relays probe fits InnoDB's 3,072 bytes.
   */
  static final int MARIADB_MAX_AGGREGATE_KEY_CHARS = 512;

  /** PostgreSQL's longest identifier, and so channel name, in bytes (NAMEDATALEN - 1). */
  private static final int MAX_CHANNEL_LENGTH = 63;

  private final Context idem;
  private final OutboxLayout layout;
  private final boolean notifying;
  /** The {@code INSERT} of n messages at index n, rendered on first use; enqueue sits on the caller's hot path. */
  private final AtomicReferenceArray<String> insertByRows = new AtomicReferenceArray<>(MAX_ROWS_PER_INSERT + 1);
  /** {@link #notifying()}'s outbox, made on its first call and kept, so callers may ask for it per enqueue. */
  private volatile Outbox notifyingTwin;

  private Outbox(Context idem, OutboxLayout layout, boolean notifying) {
    this.idem = idem;
    this.layout = layout;
    this.notifying = notifying;
  }

  /**
   * {@code INSERT} of {@code rows} messages, each bound by {@link #bind}; rendered on first use,
   * when the database is known.
   */
  private String renderInsert(int rows) {
    DSLContext d = idem.dsl();
    if (layout == OutboxLayout.DEBEZIUM) {
      return renderInsertThenDelete(d, rows);
    }
    if (idem.mariadb()) {
      // The id as its text, the headers as JSON arrays (the columns' types there), and no NOTIFY:
      // MariaDB has none, relays find the messages at their next poll.
      Row6<String, String, String, byte[], String, String> row = DSL.row(DSL.val((String) null, ID_TEXT),
          DSL.val((String) null, TOPIC), DSL.val((String) null, AGGREGATE_KEY), DSL.val((byte[]) null, PAYLOAD),
          DSL.val((String) null, HEADER_NAMES_JSON), DSL.val((String) null, HEADER_VALUES_JSON));
      return d.render(d.insertInto(T, ID_TEXT, TOPIC, AGGREGATE_KEY, PAYLOAD, HEADER_NAMES_JSON, HEADER_VALUES_JSON)
          .valuesOfRows(Collections.nCopies(rows, row)));
    }
    Row6<UUID, String, String, byte[], String[], String[]> row = DSL.row(DSL.val((UUID) null, ID), DSL.val((String) null, TOPIC),
        DSL.val((String) null, AGGREGATE_KEY), DSL.val((byte[]) null, PAYLOAD), DSL.val((String[]) null, HEADER_NAMES),
        DSL.val((String[]) null, HEADER_VALUES));
    var insert = d.insertInto(T, ID, TOPIC, AGGREGATE_KEY, PAYLOAD, HEADER_NAMES, HEADER_VALUES).valuesOfRows(Collections.nCopies(rows, row));
    // The notification rides on the insert itself (no extra round trip); PostgreSQL delivers it at
    // commit, once per transaction and channel however many messages (and rows) called it.
    Field<Object> notify = DSL.function("pg_notify", Object.class, DSL.inline(channel(idem.schema())), DSL.inline(""));
    return notifying ? d.render(insert.returningResult(notify)) : d.render(insert);
  }

  /**
   * The {@link OutboxLayout#DEBEZIUM} layout's write: the rows, bound as {@link #bind} binds them,
   * inserted into the events table and deleted again, by the ids bound once more as one array, in
   * one round trip. The type is the message's "type" header ('' without one) and the headers a JSON
   * object, both made by PostgreSQL from the header arrays.
   */
  private static String renderInsertThenDelete(DSLContext d, int rows) {
    String table = d.render(EVENTS);
    String row = "(?::uuid, ?::text, ?::text, ?::bytea, ?::text[], ?::text[])";
    return "insert into " + table + " (id, aggregatetype, aggregateid, type, payload, headers, intent)"
        + " select m.id, m.topic, m.key, coalesce(m.vals[array_position(m.names, 'type')], ''), m.payload,"
        + " jsonb_object(m.names, m.vals), m.vals[array_position(m.names, '" + Lineage.HEADER + "')] from (values " + String.join(", ", Collections.nCopies(rows, row))
        + ") as m (id, topic, key, payload, names, vals);\n"
        + "delete from " + table + " where id = any(?::uuid[])";
  }

  private String insertSql(int rows) {
    String sql = insertByRows.get(rows);
    if (sql == null) {
      sql = renderInsert(rows); // two threads may both render it: the same text, harmless
      insertByRows.set(rows, sql);
    }
    return sql;
  }

  /**
   * The NOTIFY channel of {@code idem}'s outbox, one per schema: what {@link #notifying()} enqueues
   * notify and what a listening {@link Relay} LISTENs on and wakes.
   *
   * <p>{@code <schema>.idem_outbox} while that fits PostgreSQL's 63 bytes for a channel name (the
   * name earlier versions used, so relays of both hear each other during an upgrade). A longer
   * one would make {@code pg_notify} fail, and with it every notifying enqueue, so a schema of more
   * than 51 characters gets {@code idem_outbox.} and the first 128 bits of the SHA-256 of its name
   * in hex instead (44 characters): fixed, distinct per schema, and never equal to a short form,
   * which ends in {@code .idem_outbox}. Schema names are checked to be ASCII, so characters are
   * bytes.
   */
  static String channel(String schema) {
    String plain = schema + ".idem_outbox";
    if (plain.length() <= MAX_CHANNEL_LENGTH) {
      return plain;
    }
    return "idem_outbox." + Sha256.hex(schema).substring(0, 32);
  }

  static {
    Factories.register(Outbox.class, OutboxLayout.class, Outbox.class,
        (context, layout) -> new Outbox(context, Require.notNull(layout, "layout"), false));
  }

  /** Where this outbox writes its messages. */
  OutboxLayout layout() {
    return layout;
  }

  /**
   * This outbox, made to wake listening relays ({@link Relay.Builder#listen}) when an enqueuing
   * transaction commits, with a PostgreSQL {@code NOTIFY}. Costs: the insert also calls {@code
   * pg_notify}, and PostgreSQL serializes the commits of notifying transactions of a database (a
   * lock held briefly at commit), which caps the commit rate of enqueuers under heavy load. Without
   * it, relays find new messages at their next poll.
   *
   * <p>PostgreSQL only: MariaDB has no {@code LISTEN}/{@code NOTIFY}. There this outbox itself is
   * returned, its messages are written the same, and relays find them at their next poll (within
   * their {@linkplain Relay.Builder#pollInterval poll interval}): only the wake-up is missing,
   * never a message.
   */
  public Outbox notifying() {
    if (notifying || layout == OutboxLayout.DEBEZIUM) {
      return this; // Debezium reads the write-ahead log as it is written: no relay to wake
    }
    if (idem.mariadb()) {
      return this; // no NOTIFY to send: relays poll
    }
    Outbox twin = notifyingTwin;
    if (twin == null) {
      notifyingTwin = twin = new Outbox(idem, layout, true); // a race makes two equal twins, harmless
    }
    return twin;
  }

  /**
   * Writes {@code message} in the transaction open on {@code callerTx} and returns its new id. It
   * commits or rolls back with the caller's transaction; nothing is sent before that commits.
   *
   * @return the id minted for the message, a UUIDv7 (time-ordered, strictly increasing within
   *     this JVM)
   * @throws IllegalArgumentException if {@code callerTx} is null, in auto-commit mode (the message
   *     would commit alone) or aborted, or {@code message} is null; on MariaDB also if its topic or
   *     aggregate key is longer than the column there (1,024 and 512 characters)
   * @throws IllegalStateException on MariaDB, if this outbox has the {@link OutboxLayout#DEBEZIUM}
   *     layout (PostgreSQL only); nothing is written
   * @throws DataAccessException if the database refused the row; PostgreSQL then aborted the
   *     caller's transaction, which can only be rolled back; MariaDB undid the statement and left
   *     the transaction open: roll it back too, or the business change commits without its message
   */
  public UUID enqueue(Connection callerTx, NewMessage message) {
    idem.joined(callerTx, "the message");
    refuseDebeziumOnMariaDb();
    if (message == null) {
      throw new IllegalArgumentException("message must not be null");
    }
    fitsColumns(message, "message");
    UUID id = UuidV7.next();
    try {
      insert(callerTx, new NewMessage[] {message}, new UUID[] {id}, 0, 1);
    } catch (SQLException e) {
      throw new DataAccessException("could not enqueue " + message + ": " + e.getMessage(), e);
    }
    return id;
  }

  /**
   * Writes {@code messages} in the transaction open on {@code callerTx}, in one round trip for up
   * to {@value #MAX_ROWS_PER_INSERT} messages (one multi-row {@code INSERT}), and returns their new
   * ids in the order of the list. They commit or roll back with the caller's transaction, all
   * together; nothing is sent before that commits. Each message is a row of its own, exactly as
   * {@link #enqueue(Connection, NewMessage)} writes it, and the relay publishes each separately.
   *
   * <p>All or nothing: the input is checked before anything is written, and a failure while
   * writing (the database refusing a row) aborts the caller's transaction in PostgreSQL, so no
   * part of the batch can commit; roll back and retry the whole business transaction. Not covered: pgjdbc's {@code autosave=always}, which rolls a failed statement back and keeps
   * the transaction usable, could then leave the statements before the failed one written in a
   * batch larger than {@value #MAX_ROWS_PER_INSERT}; roll back on any exception. On MariaDB, which
   * keeps the transaction usable after a failed statement, a batch of several statements is
   * written behind a savepoint and rolled back to it when one fails: nothing of the batch stays
   * written, the caller's own work does, and the caller must roll back (committing then would
   * commit the business change without its messages).
   *
   * <p>The ids are minted here, one per message in list order, as by {@link #enqueue}. The
   * database numbers the rows in the order it writes them (the list's order), and an {@linkplain
   * Relay.Builder#orderedByAggregateKey ordered relay} publishes messages of one aggregate key in
   * that order, whatever the clocks of the JVMs that minted the ids. A {@linkplain #notifying()
   * notifying} outbox still wakes listening relays once per transaction.
   *
   * @param messages the messages, none null; an empty list writes nothing (no round trip) and
   *     returns an empty list
   * @return the ids, one per message, in the order of {@code messages}; unmodifiable
   * @throws IllegalArgumentException if {@code callerTx} or {@code messages} is null, or an element
   *     is ({@code messages[i]} names it), or on MariaDB an element's topic or aggregate key is
   *     longer than the column there; nothing is written
   * @throws IllegalStateException on MariaDB, if this outbox has the {@link OutboxLayout#DEBEZIUM}
   *     layout (PostgreSQL only); nothing is written
   * @throws DataAccessException if the database refused a row; nothing of the batch can commit
   */
  public List<UUID> enqueueAll(Connection callerTx, List<NewMessage> messages) {
    idem.joined(callerTx, "the messages");
    refuseDebeziumOnMariaDb();
    NewMessage[] batch = checked(messages);
    if (batch.length == 0) {
      return List.of();
    }
    UUID[] ids = new UUID[batch.length];
    for (int i = 0; i < ids.length; i++) {
      ids[i] = UuidV7.next();
    }
    try {
      insertInChunks(callerTx, batch, ids);
    } catch (SQLException e) {
      throw new DataAccessException("could not enqueue a batch of " + batch.length + " messages: " + e.getMessage(), e);
    }
    return List.of(ids);
  }

  /** The list as an array, refused with the index of the first null element or of one too long for its columns. */
  private NewMessage[] checked(List<NewMessage> messages) {
    if (messages == null) {
      throw new IllegalArgumentException("messages must not be null");
    }
    NewMessage[] batch = messages.toArray(new NewMessage[0]); // one snapshot of the list, checked and written
    for (int i = 0; i < batch.length; i++) {
      if (batch[i] == null) {
        throw new IllegalArgumentException("messages[" + i + "] must not be null (nothing was enqueued)");
      }
      fitsColumns(batch[i], "messages[" + i + "]");
    }
    return batch;
  }

  /**
   * Refuses the {@link OutboxLayout#DEBEZIUM} layout on MariaDB, at the first enqueue (the builder
   * touches no database, so cannot know): its table and its write are PostgreSQL's.
   */
  private void refuseDebeziumOnMariaDb() {
    if (layout == OutboxLayout.DEBEZIUM && idem.mariadb()) {
      throw new IllegalStateException("OutboxLayout.DEBEZIUM is PostgreSQL only: this Idem's DataSource is on MariaDB,"
          + " whose idem schema has no idem_outbox_events for Debezium's Outbox Event Router; build it with"
          + " OutboxLayout.POLLED (the default) and run idem's Relay. Nothing was written");
    }
  }

  /**
   * On MariaDB, refuses a topic or aggregate key longer than its column there, before anything is
   * written: a strict server would fail the insert, and one without strict mode would cut the text
   * short, silently sending the message to another topic or key. PostgreSQL's columns are text.
   */
  private void fitsColumns(NewMessage m, String which) {
    if (!idem.mariadb()) {
      return;
    }
    int topic = m.topic().codePointCount(0, m.topic().length());
    if (topic > MARIADB_MAX_TOPIC_CHARS) {
      throw new IllegalArgumentException(which + ": topic is " + topic + " characters, longer than the "
          + MARIADB_MAX_TOPIC_CHARS + " idem_outbox.topic holds on MariaDB (nothing was enqueued)");
    }
    String key = m.aggregateKey();
    int keyChars = key == null ? 0 : key.codePointCount(0, key.length());
    if (keyChars > MARIADB_MAX_AGGREGATE_KEY_CHARS) {
      throw new IllegalArgumentException(which + ": aggregate key is " + keyChars + " characters, longer than the "
          + MARIADB_MAX_AGGREGATE_KEY_CHARS + " idem_outbox.aggregate_key holds on MariaDB (nothing was enqueued)");
    }
  }

  private void insertInChunks(Connection c, NewMessage[] batch, UUID[] ids) throws SQLException {
    // MariaDB undoes only the failed statement and keeps the transaction: the chunks before it
    // would stay written, so a batch of several statements gets a savepoint to undo them all.
    // PostgreSQL aborts the whole transaction instead, which needs none.
    Savepoint before = batch.length > MAX_ROWS_PER_INSERT && idem.mariadb() ? c.setSavepoint() : null;
    try {
      for (int from = 0; from < batch.length; from += MAX_ROWS_PER_INSERT) {
        insert(c, batch, ids, from, Math.min(batch.length, from + MAX_ROWS_PER_INSERT));
      }
    } catch (SQLException | RuntimeException e) {
      if (before != null) {
        try {
          c.rollback(before);
        } catch (SQLException undo) {
          e.addSuppressed(undo); // a deadlock rolled back the whole transaction, and the savepoint with it
        }
      }
      throw e;
    }
    if (before != null) {
      c.releaseSavepoint(before);
    }
  }

  /** One {@code INSERT} of {@code messages[from..to)} with their ids. */
  private void insert(Connection c, NewMessage[] messages, UUID[] ids, int from, int to) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(insertSql(to - from))) {
      int p = 1;
      for (int i = from; i < to; i++) {
        p = bind(c, ps, p, ids[i], messages[i]);
      }
      if (layout == OutboxLayout.DEBEZIUM) {
        ps.setArray(p, c.createArrayOf("uuid", java.util.Arrays.copyOfRange(ids, from, to)));
      }
      ps.execute();
    }
  }

  /** Binds one row from parameter {@code p}; returns the index of the next row's first parameter. */
  private int bind(Connection c, PreparedStatement ps, int p, UUID id, NewMessage message) throws SQLException {
    Map<String, String> headers = withIntent(message.headers());
    boolean maria = idem.mariadb();
    setId(ps, p, id, maria);
    ps.setString(p + 1, message.topic());
    ps.setString(p + 2, message.aggregateKey());
    ps.setBytes(p + 3, message.payloadUnsafe());
    if (maria) {
      ps.setString(p + 4, JsonStrings.write(headers.keySet()));
      ps.setString(p + 5, JsonStrings.write(headers.values()));
    } else {
      ps.setArray(p + 4, c.createArrayOf("text", headers.keySet().toArray(new String[0])));
      ps.setArray(p + 5, c.createArrayOf("text", headers.values().toArray(new String[0])));
    }
    return p + 6;
  }

  /**
   * {@code headers} with the {@value NewMessage#INTENT_HEADER} header of the intent whose effect runs
   * on this thread (an executor's local effect or external call, an inbox's effect), unless the
   * message names its intent itself or none runs.
   */
  private Map<String, String> withIntent(Map<String, String> headers) {
    String intent = Lineage.current(idem);
    if (intent == null || headers.containsKey(Lineage.HEADER)) {
      return headers;
    }
    Map<String, String> copy = new LinkedHashMap<>(headers);
    copy.put(Lineage.HEADER, intent);
    return copy;
  }

  /**
   * {@link #enqueue(Connection, NewMessage)} in the transaction open on this thread: {@code
   * Idem.inTransaction}'s, or a framework's found through the transaction binding.
   *
   * @throws IllegalStateException if no transaction is open on this thread: a message written
   *     alone would not commit with the work it announces; open one, or pass its connection
   */
  public UUID enqueue(NewMessage message) {
    return enqueue(open("message"), message);
  }

  /** {@link #enqueueAll(Connection, List)} in the transaction open on this thread; see {@link #enqueue(NewMessage)}. */
  public List<UUID> enqueueAll(List<NewMessage> messages) {
    return enqueueAll(open("messages"), messages);
  }

  private Connection open(String what) {
    Tx tx = idem.current();
    if (tx == null) {
      throw new IllegalStateException("no transaction is open on this thread, so the " + what + " would commit alone,"
          + " apart from the work it announces: call enqueue inside Idem.inTransaction or your framework's"
          + " transaction (with its TransactionBinding), or pass the transaction's connection");
    }
    return tx.connection();
  }
}
