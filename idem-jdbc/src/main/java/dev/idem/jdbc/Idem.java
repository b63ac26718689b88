package dev.idem.jdbc;

import dev.idem.event.IdemListener;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.internal.AutoCommit;
import dev.idem.jdbc.internal.Identifiers;
import dev.idem.jdbc.internal.OwnTransaction;
import dev.idem.jdbc.internal.SqlStates;
import dev.idem.jdbc.lease.Leases;
import dev.idem.jdbc.outbox.Outbox;
import dev.idem.jdbc.outbox.Publisher;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.jdbc.sequence.EntitySequences;
import dev.idem.jdbc.transition.Transitions;
import java.sql.Connection;
import java.util.Locale;
import javax.sql.DataSource;
import org.flywaydb.core.Flyway;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.conf.MappedSchema;
import org.jooq.conf.RenderMapping;
import org.jooq.conf.Settings;
import org.jooq.impl.DSL;

/**
 * The entry point of idem on PostgreSQL: one per database and schema, shared by the whole service.
 * Every tool comes from here: {@link #executor()}, {@link #inbox(String)}, {@link #outbox()},
 * {@link #relay(Publisher)}, {@link #transitions(String)}, {@link #leases()}, {@link
 * #sequences(String)}.
 *
 * <pre>{@code
 * Idem idem = Idem.builder(dataSource).build();
 * idem.migrate(); // or run the migrations with your own Flyway, see MIGRATIONS
 * }</pre>
 *
 * <h2>Transactions</h2>
 *
 * {@link #inTransaction} and {@link #useTransaction} run work in one transaction on a connection
 * from the {@code DataSource}. A nested call on the same thread joins the open transaction instead
 * of opening another, as in jdbi: it is part of the outer work and sets no savepoint, so its
 * exception rolls nothing back by itself. Let it propagate; if you catch it and go on, what the
 * nested work wrote before throwing commits with the outer transaction (idem's own joined calls,
 * the executor's, the inbox's, {@code applyIfNewer}'s, set savepoints of their own and leave nothing
 * behind when they fail). An exception out of the outermost call rolls back and is rethrown as it
 * was (a rollback failure is
 * attached to it with {@code addSuppressed}). A serialization failure or deadlock (SQLSTATE 40001 or
 * 40P01) rolls back and <b>runs the callback again</b>, from the start, up to {@link
 * Builder#serializationRetries} times; then the error is thrown. So a callback must do nothing
 * outside the transaction that cannot be repeated. A callback that catches an SQL error and
 * returns has left PostgreSQL's transaction aborted: the call rolls back and throws {@code
 * DataAccessException} instead of committing, so it never reports success for work that is gone.
 *
 * <h2>The DataSource</h2>
 *
 * Every {@code getConnection()} must hand out a connection of its own, as a pool does (HikariCP).
 * Not one bound to the thread's current transaction (Spring's {@code
 * TransactionAwareDataSourceProxy}): idem commits some statements by themselves (an external claim
 * before the call goes out, reads that must see other copies' commits, relay and expiry batches),
 * and on such a connection they would commit only with the caller's transaction. To join a
 * framework's transaction, pass its connection to the call that takes one.
 *
 * <p>Thread-safe. Holds no connection between calls.
 */
public final class Idem {

  /** Where idem's Flyway migrations live on the class path, for users running their own Flyway. */
  public static final String MIGRATIONS = "classpath:dev/idem/jdbc/migration";

  /** idem's own Flyway history table, so its migrations never mix with the service's. */
  public static final String HISTORY_TABLE = "idem_schema_history";

  /** The default schema of idem's tables. */
  public static final String DEFAULT_SCHEMA = "idem";

  static {
    // jOOQ prints a banner and tips on first use unless told not to; a library must stay quiet.
    if (System.getProperty("org.jooq.no-logo") == null) {
      System.setProperty("org.jooq.no-logo", "true");
    }
    if (System.getProperty("org.jooq.no-tips") == null) {
      System.setProperty("org.jooq.no-tips", "true");
    }
  }

  private final DataSource dataSource;
  private final String schema;
  private final IdemListener listener;
  private final int serializationRetries;
  private final Settings settings;
  private final DSLContext detached;
  private final ThreadLocal<Tx> open = new ThreadLocal<>();
  private volatile Outbox outbox;

  private Idem(Builder b) {
    this.dataSource = b.dataSource;
    this.schema = b.schema;
    this.listener = b.listener;
    this.serializationRetries = b.serializationRetries;
    // idem's tables are written against the schema "idem"; a configured schema is mapped at render time.
    this.settings = new Settings()
        .withExecuteLogging(false)
        .withRenderMapping(new RenderMapping().withSchemata(new MappedSchema().withInput(DEFAULT_SCHEMA).withOutput(schema)));
    this.detached = DSL.using(SQLDialect.POSTGRES, settings);
  }

  /** Starts the configuration of idem on {@code dataSource}. */
  public static Builder builder(DataSource dataSource) {
    return new Builder(dataSource);
  }

  /**
   * Applies idem's migrations to its schema (created if missing), with its own history table.
   * Safe to call on every start and from several processes at once: Flyway takes a lock.
   *
   * @throws IllegalArgumentException before anything is created, if the schema name is a
   *     reserved word of PostgreSQL's, which must be quoted (such as {@code order} or {@code left})
   */
  public void migrate() {
    // The migrations name the schema through Flyway's ${flyway:defaultSchema}, unquoted, so a
    // reserved word would fail half-way through them as a syntax error. Only the reserved and the
    // type/function-name keywords (catcode R and T) cannot be a schema there; an unreserved or a
    // column-name keyword (position, time, values) can, and quote_ident would refuse those too.
    boolean reserved = AutoCommit.run(dataSource, "idem migrate", c -> dsl(c)
        .fetchExists(DSL.selectOne().from("pg_catalog.pg_get_keywords()")
            .where(DSL.field("word").eq(DSL.val(schema))).and(DSL.field("catcode::text").in("R", "T"))));
    if (reserved) {
      throw new IllegalArgumentException("schema '" + schema + "' is a reserved word of PostgreSQL's, which idem's migrations"
          + " would have to quote: choose another schema name");
    }
    Flyway.configure(Idem.class.getClassLoader())
        .dataSource(dataSource)
        .schemas(schema)
        .defaultSchema(schema)
        .createSchemas(true)
        .table(HISTORY_TABLE)
        .locations(MIGRATIONS)
        .load()
        .migrate();
  }

  /** The idempotent executor: a key table guarding local and external effects. */
  public IdempotentExecutor.Builder executor() {
    return IdempotentExecutor.builder(this);
  }

  /** The inbox of one consumer: each message id applied once. */
  public Inbox.Builder inbox(String consumer) {
    return Inbox.builder(this, consumer);
  }

  /**
   * The transactional outbox: messages written in the caller's transaction. The same instance on
   * every call (it renders its statements once), so calling this before each enqueue costs nothing.
   */
  public Outbox outbox() {
    Outbox o = outbox;
    if (o == null) {
      outbox = o = Outbox.of(this); // a race makes two equal outboxes, harmless
    }
    return o;
  }

  /** A relay that moves outbox messages to {@code publisher}, at least once. */
  public Relay.Builder relay(Publisher publisher) {
    return Relay.builder(this, publisher);
  }

  /** Conditional state transitions on one of your own tables. */
  public Transitions.Builder transitions(String table) {
    return Transitions.builder(this, table);
  }

  /** Leases on named resources, with fencing tokens. */
  public Leases leases() {
    return Leases.of(this);
  }

  /** Per-entity sequence numbers for one stream of events. */
  public EntitySequences sequences(String stream) {
    return EntitySequences.of(this, stream);
  }

  /** The schema of idem's tables. */
  public String schema() {
    return schema;
  }

  /** The {@code DataSource} idem takes its connections from, as given to {@link #builder}. */
  public DataSource dataSource() {
    return dataSource;
  }

  /** The listener every tool made here reports to ({@link IdemListener#NONE} if none). */
  public IdemListener listener() {
    return listener;
  }

  /** A jOOQ context bound to {@code connection}, with idem's schema mapping. */
  public DSLContext dsl(Connection connection) {
    return DSL.using(connection, SQLDialect.POSTGRES, settings);
  }

  /** A jOOQ context with no connection, for rendering SQL once (idem's hot paths do). */
  public DSLContext dsl() {
    return detached;
  }

  /** The transaction open on this thread through this {@code Idem}, or null. */
  public Tx currentTransaction() {
    return open.get();
  }

  /**
   * Runs {@code work} in a transaction and returns its result; joins the transaction already open
   * on this thread, if any. See the class comment for rollback and the 40001 re-run.
   */
  public <T, X extends Exception> T inTransaction(TxCallback<T, X> work) throws X {
    if (work == null) {
      throw new IllegalArgumentException("work must not be null");
    }
    Tx joined = open.get();
    if (joined != null) {
      return work.apply(joined);
    }
    for (int attempt = 0; ; attempt++) {
      try {
        return runOnce(work);
      } catch (Exception e) {
        if (attempt < serializationRetries && SqlStates.isRetryable(e)) {
          continue; // the transaction rolled back; run the callback again from the start
        }
        throw e;
      }
    }
  }

  /** {@link #inTransaction} for work that returns nothing. */
  public <X extends Exception> void useTransaction(TxConsumer<X> work) throws X {
    if (work == null) {
      throw new IllegalArgumentException("work must not be null");
    }
    inTransaction(tx -> {
      work.accept(tx);
      return null;
    });
  }

  private <T, X extends Exception> T runOnce(TxCallback<T, X> work) throws X {
    return OwnTransaction.run(dataSource, c -> {
      Tx tx = new OpenTx(c);
      open.set(tx);
      try {
        return work.apply(tx);
      } finally {
        open.remove();
      }
    });
  }

  /**
   * A transaction of idem's own. Its jOOQ context is made when first asked for: much work on idem's
   * transactions (its claims, a callback on the JDBC connection) never uses one, and making it
   * costs a jOOQ configuration per transaction.
   */
  private final class OpenTx implements Tx {
    private final Connection connection;
    private volatile DSLContext dsl;

    OpenTx(Connection connection) {
      this.connection = connection;
    }

    @Override
    public Connection connection() {
      return connection;
    }

    @Override
    public DSLContext dsl() {
      DSLContext d = dsl;
      if (d == null) {
        dsl = d = Idem.this.dsl(connection);
      }
      return d;
    }
  }

  /**
   * Configures an {@link Idem}. Validates and copies everything in {@link #build()}; the result is
   * immutable.
   */
  public static final class Builder {
    private final DataSource dataSource;
    private String schema = DEFAULT_SCHEMA;
    private IdemListener listener = IdemListener.NONE;
    private int serializationRetries = 3;

    private Builder(DataSource dataSource) {
      if (dataSource == null) {
        throw new IllegalArgumentException("dataSource must not be null");
      }
      this.dataSource = dataSource;
    }

    /**
     * The schema of idem's tables; default {@value Idem#DEFAULT_SCHEMA}. Lower-case letters, digits
     * and underscores, not starting with a digit, at most 63, and not a reserved word of
     * PostgreSQL's (checked by {@link Idem#migrate()}): the migrations name it unquoted.
     */
    public Builder schema(String schema) {
      this.schema = schema;
      return this;
    }

    /** Receives the events of every tool made from this {@code Idem}. */
    public Builder listener(IdemListener listener) {
      this.listener = listener;
      return this;
    }

    /**
     * How many times a transaction that failed with SQLSTATE 40001 or 40P01 is run again (the
     * callback re-runs each time); default 3, 0 to surface the first failure. idem's own guards
     * (the executor, the inbox, sequences) also run a call again, up to 10 times and not counted
     * here, when its claim lost a race to another copy before any of your code ran.
     */
    public Builder serializationRetries(int retries) {
      this.serializationRetries = retries;
      return this;
    }

    /**
     * Checks the settings and builds the {@code Idem}; touches no database (the schema's reserved
     * words are checked by {@link Idem#migrate()}).
     *
     * @throws IllegalArgumentException naming the setting: a schema that is null, not a plain
     *     lower-case identifier, a null listener, or negative serialization retries
     */
    public Idem build() {
      Identifiers.check("schema", schema);
      if (!schema.equals(schema.toLowerCase(Locale.ROOT))) {
        // Flyway creates the schema quoted, but the migrations name it unquoted, which PostgreSQL
        // folds to lower case: they would fail with "schema ... does not exist".
        throw new IllegalArgumentException("schema '" + schema + "' has upper-case letters; idem's migrations name"
            + " the schema unquoted, so PostgreSQL would fold it to lower case: use a lower-case name");
      }
      if (listener == null) {
        throw new IllegalArgumentException("listener must not be null (use IdemListener.NONE)");
      }
      if (serializationRetries < 0) {
        throw new IllegalArgumentException("serializationRetries must be 0 or more, was " + serializationRetries);
      }
      return new Idem(this);
    }
  }
}
