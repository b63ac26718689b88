package dev.idem.debezium;

import dev.idem.internal.base.Require;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.OutboxLayout;
import java.sql.SQLException;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

/**
 * The settings of a Debezium PostgreSQL connector with the Outbox Event Router that relays idem's
 * outbox written in the {@link OutboxLayout#DEBEZIUM} layout: give them to Kafka Connect (as the
 * connector's configuration), Debezium Server or the embedded engine, with your own additions
 * (offset storage). The converters are set: the key as plain text, the value as bytes, headers as
 * text.
 *
 * <pre>{@code
 * Idem idem = Idem.builder(dataSource).outboxLayout(OutboxLayout.DEBEZIUM).build();   // enqueue code unchanged
 * Map<String, String> connector = DebeziumOutbox.builder(idem)
 *     .database("db.internal", 5432, "shop").credentials("debezium", secret)
 *     .build();
 * }</pre>
 *
 * <p>What a consumer then gets, per message enqueued and committed: a record on the message's topic
 * ({@code aggregatetype}, the topic name as is), keyed by its aggregate key ({@code aggregateid},
 * written as its plain UTF-8 bytes by {@link #STRING}, as idem-kafka's publisher writes it; no key
 * without one), whose value is the payload's bytes, with the headers {@code id} (the id minted at
 * enqueue: what an inbox deduplicates by), {@code type} (the message's "type" header, '' without
 * one), {@code idem-headers} (every header of the message, as one JSON object) and {@code
 * idem-intent} (the key of the intent that produced it, null when it carries none; what an inbox
 * records for lineage). Each header's value is its UTF-8 text ({@link #SIMPLE_HEADERS}).
 *
 * <p>Guarantees: nothing idem writes is an update or a snapshot read; the connector reads the
 * events table only, inserts only (updates, deletes and truncates are skipped before the router).
 * Does not guarantee: exactly once. Debezium delivers at least once (a restart re-sends from its
 * last committed offset), so consume through an inbox by the {@code id} header. Messages written
 * while no replication slot exists are never seen: start the connector (create its slot) before
 * switching the layout.
 *
 * <p>PostgreSQL only: the {@code DEBEZIUM} layout's events table and the connector's logical
 * replication are PostgreSQL's. On MariaDB {@link #builder} refuses the {@code Idem}, and an {@code
 * Idem} built with {@link OutboxLayout#DEBEZIUM} refuses its first enqueue, writing nothing; use the
 * polled layout and idem's relay (or idem-kafka's publisher) there.
 *
 * <p>Immutable; the builder validates.
 */
public final class DebeziumOutbox {
  /** The connector class of Debezium's PostgreSQL connector. */
  public static final String CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector";
  /** Debezium's Outbox Event Router. */
  public static final String EVENT_ROUTER = "io.debezium.transforms.outbox.EventRouter";
  /** Kafka Connect's converter that passes the payload's bytes through untouched. */
  public static final String BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter";
  /**
   * Kafka Connect's converter that writes a string as its UTF-8 bytes: the record key, so that it
   * is the plain aggregate id, as idem-kafka's publisher writes it (Kafka Connect's usual {@code
   * JsonConverter} would wrap it in a JSON envelope).
   */
  public static final String STRING = "org.apache.kafka.connect.storage.StringConverter";
  /** Kafka Connect's header converter that writes a string header as its UTF-8 bytes (its default, said). */
  public static final String SIMPLE_HEADERS = "org.apache.kafka.connect.storage.SimpleHeaderConverter";
  /** The header that carries every header of the message, as a JSON object. */
  public static final String HEADERS_HEADER = "idem-headers";
  /**
   * The header that carries the key of the intent that produced the message (its {@value
   * NewMessage#INTENT_HEADER} header, as idem-kafka's publisher writes it), for an inbox to record;
   * absent (null) when the message carries none.
   */
  public static final String INTENT_HEADER = NewMessage.INTENT_HEADER;
  /** The events table, in idem's schema. */
  public static final String TABLE = "idem_outbox_events";

  private DebeziumOutbox() {}

  /**
   * Settings for relaying the outbox of {@code idem} (its schema). Asks the database, once, which
   * it is (in a transaction of {@code idem}'s, joining one open on this thread), since the layout
   * and the connector are PostgreSQL's.
   *
   * @throws IllegalArgumentException if {@code idem} is null
   * @throws IllegalStateException if {@code idem}'s DataSource is not on PostgreSQL (MariaDB, MySQL),
   *     naming the database and what to use there instead
   */
  public static Builder builder(Idem idem) {
    Require.notNull(idem, "idem");
    String product;
    try {
      product = idem.inTransaction(tx -> tx.connection().getMetaData().getDatabaseProductName());
    } catch (SQLException e) {
      throw new IllegalStateException("could not ask idem's database which it is: " + e.getMessage(), e);
    }
    if (!"PostgreSQL".equals(product)) {
      throw new IllegalStateException("DebeziumOutbox is PostgreSQL only (the DEBEZIUM outbox layout's events table, read by"
          + " Debezium's PostgreSQL connector through logical replication), and idem's DataSource is on " + product
          + ": relay the outbox in the polled layout (the default) with idem's Relay, or idem-kafka's KafkaPublisher");
    }
    return new Builder(idem.schema());
  }

  /**
   * Only the router's settings ({@code transforms.outbox.*}, and {@code transforms=outbox}), for a
   * connector configured otherwise: what maps idem's columns to topic, key, value and headers.
   */
  public static Map<String, String> eventRouter() {
    Map<String, String> p = new LinkedHashMap<>();
    p.put("transforms", "outbox");
    p.put("transforms.outbox.type", EVENT_ROUTER);
    // the defaults, said: id -> header "id", aggregatetype routes, aggregateid is the key, payload the value
    p.put("transforms.outbox.table.field.event.id", "id");
    p.put("transforms.outbox.table.field.event.key", "aggregateid");
    p.put("transforms.outbox.table.field.event.payload", "payload");
    p.put("transforms.outbox.route.by.field", "aggregatetype");
    // the topic is the message's topic as enqueued, not Debezium's default "outbox.event.<topic>"
    p.put("transforms.outbox.route.topic.replacement", "${routedByValue}");
    p.put("transforms.outbox.table.fields.additional.placement",
        "type:header:type,headers:header:" + HEADERS_HEADER + ",intent:header:" + INTENT_HEADER);
    // idem never updates a row: one that did (an operator's mistake) is skipped and logged as an error
    p.put("transforms.outbox.table.op.invalid.behavior", "error");
    return Collections.unmodifiableMap(p);
  }

  /** Configures the connector; {@link #database} is required, the rest has defaults. */
  public static final class Builder {
    private final String schema;
    private String name = "idem-outbox";
    private String hostname;
    private int port;
    private String database;
    private String user = "postgres";
    private String password;
    private String slot = "idem_outbox";
    private String publication = "idem_outbox";
    private String topicPrefix = "idem";

    private Builder(String schema) {
      this.schema = schema;
    }

    /** The connector's name; default {@code idem-outbox}. */
    public Builder name(String name) {
      this.name = name;
      return this;
    }

    /** Where the database is: the server (read with logical replication, {@code wal_level=logical}) and database name. */
    public Builder database(String hostname, int port, String database) {
      this.hostname = hostname;
      this.port = port;
      this.database = database;
      return this;
    }

    /** The user Debezium connects as (it needs the REPLICATION attribute) and its password (null for none); default postgres. */
    public Builder credentials(String user, String password) {
      this.user = user;
      this.password = password;
      return this;
    }

    /** The replication slot; default {@code idem_outbox}. One per connector: two connectors on one slot steal each other's changes. */
    public Builder slot(String slot) {
      this.slot = slot;
      return this;
    }

    /** The publication, created by the connector for the events table only; default {@code idem_outbox}. */
    public Builder publication(String publication) {
      this.publication = publication;
      return this;
    }

    /** Debezium's {@code topic.prefix} (its own topics, such as heartbeats; not the messages'); default {@code idem}. */
    public Builder topicPrefix(String topicPrefix) {
      this.topicPrefix = topicPrefix;
      return this;
    }

    /**
     * The connector's settings and the router's ({@link #eventRouter()}), as an unmodifiable map in
     * a stable order.
     *
     * @throws IllegalArgumentException naming the setting that is missing or invalid
     */
    public Map<String, String> build() {
      Require.notBlank(name, "name");
      Require.notBlank(hostname, "database hostname");
      Require.notBlank(database, "database name");
      if (port < 1 || port > 65_535) {
        throw new IllegalArgumentException("database port must be 1 to 65535, was " + port);
      }
      Require.notBlank(user, "user");
      identifier("slot", slot);
      identifier("publication", publication);
      Require.notBlank(topicPrefix, "topicPrefix");
      Map<String, String> p = new LinkedHashMap<>();
      p.put("name", name);
      p.put("connector.class", CONNECTOR);
      p.put("database.hostname", hostname);
      p.put("database.port", Integer.toString(port));
      p.put("database.dbname", database);
      p.put("database.user", user);
      if (password != null) {
        p.put("database.password", password);
      }
      p.put("topic.prefix", topicPrefix);
      // pgoutput is built into PostgreSQL 10+: no server plug-in to install
      p.put("plugin.name", "pgoutput");
      p.put("slot.name", slot);
      p.put("publication.name", publication);
      p.put("publication.autocreate.mode", "filtered");
      p.put("table.include.list", schema + "." + TABLE);
      // the table is always empty (idem deletes each row in the transaction that inserted it):
      // there is nothing to snapshot, and the deletes are skipped, never routed or made tombstones
      p.put("snapshot.mode", "no_data");
      p.put("skipped.operations", "u,d,t");
      p.put("tombstones.on.delete", "false");
      // the payload column is bytea: its bytes go through as the record's value
      p.put("binary.handling.mode", "bytes");
      p.put("value.converter", BYTES);
      // the key is the aggregate id's UTF-8 bytes, never a JSON envelope, and the headers strings
      p.put("key.converter", STRING);
      p.put("header.converter", SIMPLE_HEADERS);
      p.putAll(eventRouter());
      return Collections.unmodifiableMap(p);
    }

    /**
     * {@link #build()} as {@link Properties}, the form the embedded engine takes; with each converter
     * also as {@code <converter>.class}, where the engine's {@code ClientProvided} format reads it
     * (Kafka Connect's form, {@code key.converter}, is what {@link #build()} gives).
     */
    public Properties properties() {
      Properties p = new Properties();
      Map<String, String> settings = build();
      p.putAll(settings);
      for (String converter : new String[] {"key.converter", "value.converter", "header.converter"}) {
        p.setProperty(converter + ".class", settings.get(converter));
      }
      return p;
    }

    /** Slot and publication names: PostgreSQL's rules for a slot (lower-case letters, digits, underscores; 63 at most). */
    private static void identifier(String what, String value) {
      Require.notBlank(value, what);
      if (!value.matches("[a-z0-9_]{1,63}")) {
        throw new IllegalArgumentException(what + " '" + value + "' must be 1 to 63 lower-case letters, digits or underscores");
      }
    }
  }
}
