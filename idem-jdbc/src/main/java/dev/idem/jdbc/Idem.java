package dev.idem.jdbc;

import dev.idem.event.IdemListener;
import dev.idem.internal.base.Require;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.Factories;
import dev.idem.jdbc.internal.Identifiers;
import dev.idem.jdbc.lease.Lease;
import dev.idem.jdbc.lease.Leases;
import dev.idem.jdbc.nature.Totals;
import dev.idem.jdbc.nature.UniqueRows;
import dev.idem.jdbc.notify.Notifications;
import dev.idem.jdbc.ops.Operations;
import dev.idem.jdbc.outbox.Outbox;
import dev.idem.jdbc.outbox.OutboxLayout;
import dev.idem.jdbc.outbox.Publisher;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.jdbc.reconcile.IntentLineage;
import dev.idem.jdbc.reconcile.Reconciliation;
import dev.idem.jdbc.sequence.EntitySequences;
import dev.idem.jdbc.transition.Transitions;
import dev.idem.jdbc.tx.RetryBudget;
import dev.idem.jdbc.tx.TransactionBinding;
import dev.idem.jdbc.tx.TxCallback;
import dev.idem.jdbc.tx.TxConsumer;
import java.time.Duration;
import java.util.Locale;
import java.util.Optional;
import javax.sql.DataSource;

/**
 * The entry point of idem on PostgreSQL, and the only way to build its tools: one per database and
 * schema, shared by the whole service. {@link #executor()}, {@link #inbox(String)}, {@link
 * #outbox()}, {@link #relay(Publisher)}, {@link #transitions(String)}, {@link #leases()}, {@link
 * #sequences(String)}, {@link #totals(String)}, {@link #uniqueRows(String)}, {@link
 * #notifications(String)}.
 *
 * <pre>{@code
 * IdemFlyway.migrate(dataSource); // idem's tables (module idem-flyway), or your own Flyway: MIGRATIONS
 * Idem idem = Idem.builder(dataSource).build();
 * }</pre>
 *
 * <h2>Transactions: one rule for every tool</h2>
 *
 * Every call that writes (an executor's {@code execute}, an inbox's {@code receive}, an outbox's
 * {@code enqueue}, a transition, a sequence) is in one of two forms:
 *
 * <ul>
 *   <li><b>Without a connection</b>: it joins the transaction open on this thread, if there is one
 *       ({@link #inTransaction}, or a framework's, found through the {@link TransactionBinding}),
 *       and otherwise runs in a transaction of its own.
 *   <li><b>With your {@code Connection}</b> ({@code callerTx}): it joins the transaction open on it
 *       (auto-commit must be off), under a savepoint of its own.
 * </ul>
 *
 * A joined call never commits or rolls back your transaction: what it wrote commits with your
 * work or not at all. Without a binding, idem does not know about a framework's transaction: a
 * call inside Spring's {@code @Transactional} with no binding runs on a connection of its own and
 * commits alone. Install the framework's binding (see {@link TransactionBinding}), or pass the
 * connection. A {@code DataSource} that hands out the thread's current transaction (Spring's
 * {@code TransactionAwareDataSourceProxy}) is refused where idem would commit it.
 *
 * <p>{@link #inTransaction} and {@link #useTransaction} run work in one transaction on a connection
 * from the {@code DataSource}. A nested call on the same thread joins the open transaction instead
 * of opening another, as in jdbi: it is part of the outer work and sets no savepoint, so its
 * exception rolls nothing back by itself. Let it propagate; if you catch it and go on, what the
 * nested work wrote before throwing commits with the outer transaction (idem's own joined calls
 * set savepoints of their own and leave nothing behind when they fail). An exception out of the
 * outermost call rolls back and is rethrown as it was (a rollback failure is attached to it with
 * {@code addSuppressed}). A serialization failure, a deadlock or the server out of memory
 * (SQLSTATE 40001, 40P01, 53200) rolls back and <b>runs the callback again</b>, from the start,
 * within the {@link RetryBudget}; then the error is thrown. So a callback must do nothing outside
 * the transaction that cannot be repeated. A callback that catches an SQL error and returns has
 * left PostgreSQL's transaction aborted: the call rolls back and throws {@code
 * DataAccessException} instead of committing, so it never reports success for work that is gone.
 *
 * <h2>The DataSource</h2>
 *
 * Every {@code getConnection()} must hand out a connection of its own, as a pool does (HikariCP):
 * idem commits some statements by themselves (an external claim before the call goes out, reads
 * that must see other copies' commits, relay and expiry batches).
 *
 * <h2>Global state</h2>
 *
 * None: idem sets no system property and no logger level. jOOQ, which idem renders its SQL with,
 * logs a banner and a tip once per JVM at INFO through the logger {@code org.jooq.Constants};
 * silence it in your logging configuration ({@code logging.level.org.jooq.Constants=warn} in
 * Spring Boot) or with {@code -Dorg.jooq.no-logo=true -Dorg.jooq.no-tips=true} on your command line.
 *
 * <p>Thread-safe. Holds no connection between calls.
 */
public final class Idem {

  /**
   * Where idem's Flyway migrations live on the class path, for users running their own Flyway
   * (idem-flyway's {@code IdemFlyway.migrate} runs them in one call): one folder per database,
   * {@code postgresql} and {@code mariadb} (MariaDB 10.11+). Spring Boot's Flyway fills in {@code
   * {vendor}} itself, but names MySQL {@code mysql}, which idem does not ship; plain Flyway does
   * not fill it in: replace it with the folder of your database.
   */
  public static final String MIGRATIONS = "classpath:dev/idem/jdbc/migration/{vendor}";

  /**
   * The partitioned layout's migration (docs/scale.md): add it to your Flyway's locations beside
   * {@link #MIGRATIONS}, at the first migration, to partition the key table and the inbox by the
   * day of UUIDv7 keys.
   */
  public static final String PARTITIONED_MIGRATIONS = "classpath:dev/idem/jdbc/migration-partitioned";

  /** idem's own Flyway history table, so its migrations never mix with the service's. */
  public static final String HISTORY_TABLE = "idem_schema_history";

  /** The default schema of idem's tables. */
  public static final String DEFAULT_SCHEMA = Context.DEFAULT_SCHEMA;
  /** The default of {@link Builder#answersFromMemory}: 30 seconds. */
  public static final Duration DEFAULT_ANSWERS_FROM_MEMORY = Duration.ofSeconds(30);
  /** The longest {@link Builder#answersFromMemory} accepts: a row changed by hand is seen again within it. */
  public static final Duration MAX_ANSWERS_FROM_MEMORY = Duration.ofMinutes(10);

  private final Context context;
  private final OutboxLayout outboxLayout;
  private volatile Outbox outbox;

  private Idem(Builder b) {
    this.context = new Context(b.dataSource, b.schema, b.listener, b.binding, b.retries, b.answersFromMemory);
    // The tools that must run on one instance at a time (the completer) lease through this, not
    // through the lease package, on which no tool depends.
    this.context.alone((resource, holder, ttl, work) -> {
      Optional<Lease> lease = leases().acquire(resource, holder, ttl);
      if (lease.isEmpty()) {
        return false;
      }
      try {
        work.run();
      } finally {
        try {
          lease.get().release();
        } catch (RuntimeException e) {
          // the database went away: the lease ends on its own at its ttl
        }
      }
      return true;
    });
    this.outboxLayout = b.outboxLayout;
  }

  /** Starts the configuration of idem on {@code dataSource}. */
  public static Builder builder(DataSource dataSource) {
    return new Builder(dataSource);
  }

  /** The idempotent executor: a key table guarding local and external effects. */
  public IdempotentExecutor.Builder executor() {
    return Factories.make(IdempotentExecutor.class, Void.class, IdempotentExecutor.Builder.class, context, null);
  }

  /** The inbox of one consumer: each message id applied once. */
  public Inbox.Builder inbox(String consumer) {
    return Factories.make(Inbox.class, String.class, Inbox.Builder.class, context, consumer);
  }

  /**
   * The transactional outbox: messages written in the caller's transaction, in the {@link
   * Builder#outboxLayout layout} this {@code Idem} was built with. The same instance on every call
   * (it renders its statements once), so calling this before each enqueue costs nothing.
   */
  public Outbox outbox() {
    Outbox o = outbox;
    if (o == null) {
      outbox = o = Factories.make(Outbox.class, OutboxLayout.class, Outbox.class, context, outboxLayout); // a race makes two equal outboxes, harmless
    }
    return o;
  }

  /** A relay that moves outbox messages to {@code publisher}, at least once. */
  public Relay.Builder relay(Publisher publisher) {
    return Factories.make(Relay.class, Publisher.class, Relay.Builder.class, context, publisher);
  }

  /** Conditional state transitions on one of your own tables. */
  public Transitions.Builder transitions(String table) {
    return Factories.make(Transitions.class, String.class, Transitions.Builder.class, context, table);
  }

  /**
   * Totals on one of your own tables that never move backwards: a write of the whole total keeps
   * the larger of what the row holds and what arrives.
   */
  public Totals.Builder totals(String table) {
    return Factories.make(Totals.class, String.class, Totals.Builder.class, context, table);
  }

  /**
   * Rows of one of your own tables that exist once under a unique key: set membership, or a
   * business key such as {@code (order_id, step)} as the guard of an effect.
   */
  public UniqueRows.Builder uniqueRows(String table) {
    return Factories.make(UniqueRows.class, String.class, UniqueRows.Builder.class, context, table);
  }

  /**
   * One message type of effects that cannot be made idempotent (email, SMS, push): its direction
   * of failure, a leased claim per notification and channel, a cap per recipient, a collapse id.
   */
  public Notifications.Builder notifications(String type) {
    return Factories.make(Notifications.class, String.class, Notifications.Builder.class, context, type);
  }

  /** Leases on named resources, with fencing tokens. */
  public Leases leases() {
    return Factories.make(Leases.class, Void.class, Leases.class, context, null);
  }

  /** Per-entity sequence numbers for one stream of events. */
  public EntitySequences sequences(String stream) {
    return Factories.make(EntitySequences.class, String.class, EntitySequences.class, context, stream);
  }

  /**
   * The operator's view: stuck external effects (unknown outcomes) to resolve or release, parked
   * outbox messages to re-drive, and the gauges' counts.
   */
  public Operations operations() {
    return Factories.make(Operations.class, Void.class, Operations.class, context, null);
  }

  /**
   * Reconciliation of your effect table against idem's keys: duplicate effects, effects with no
   * key, keys with no effect, unknown outcomes; and a record of the breaks found.
   */
  public Reconciliation reconciliation() {
    return Factories.make(Reconciliation.class, Void.class, Reconciliation.class, context, null);
  }

  /**
   * The detector of two message ids for one intent (a duplicate born upstream), read from the
   * intents the inbox recorded and the outbox's messages carry; and a record of what it found.
   */
  public IntentLineage lineage() {
    return Factories.make(IntentLineage.class, Void.class, IntentLineage.class, context, null);
  }

  /**
   * The listener this Idem's tools report to ({@link IdemListener#NONE} when none was set). For an
   * adapter that answers a repeat itself, without asking the store (the HTTP filter refusing a
   * copy that found another request running under its key in this process), so its answers are
   * counted with the tools' own.
   */
  public IdemListener listener() {
    return context.listener();
  }

  /**
   * The schema of idem's tables: the one named on the builder, else {@value #DEFAULT_SCHEMA} on
   * PostgreSQL, else (on MariaDB, where a schema is a database) the DataSource's own database,
   * asked of the database at the first call.
   */
  public String schema() {
    return context.tablesSchema();
  }

  /**
   * Runs {@code work} in a transaction and returns its result; joins the transaction already open
   * on this thread (idem's, or the binding's), if any. See the class comment for rollback and the
   * re-runs.
   */
  public <T, X extends Exception> T inTransaction(TxCallback<T, X> work) throws X {
    Require.notNull(work, "work");
    return context.inTransaction(work);
  }

  /** {@link #inTransaction} for work that returns nothing. */
  public <X extends Exception> void useTransaction(TxConsumer<X> work) throws X {
    Require.notNull(work, "work");
    context.inTransaction(tx -> {
      work.accept(tx);
      return null;
    });
  }

  /**
   * Configures an {@link Idem}. Validates and copies everything in {@link #build()}; the result is
   * immutable.
   */
  public static final class Builder {
    private final DataSource dataSource;
    /** Null until named: the default is {@link Idem#DEFAULT_SCHEMA} on PostgreSQL, the DataSource's database on MariaDB. */
    private String schema;
    private boolean schemaSet;
    private IdemListener listener = IdemListener.NONE;
    private TransactionBinding binding = TransactionBinding.NONE;
    private RetryBudget retries = RetryBudget.DEFAULT;
    private OutboxLayout outboxLayout = OutboxLayout.POLLED;
    private Duration answersFromMemory = DEFAULT_ANSWERS_FROM_MEMORY;

    private Builder(DataSource dataSource) {
      this.dataSource = Require.notNull(dataSource, "dataSource");
    }

    /**
     * The schema of idem's tables; default {@value Idem#DEFAULT_SCHEMA} on PostgreSQL, and on MariaDB
     * (where a schema is a database) the DataSource's own database. Lower-case letters, digits
     * and underscores, not starting with a digit, at most 63, and not a reserved word of
     * PostgreSQL's (checked by {@code IdemFlyway.migrate}): the migrations name it unquoted.
     */
    public Builder schema(String schema) {
      this.schema = schema;
      this.schemaSet = true;
      return this;
    }

    /** Receives the events of every tool made from this {@code Idem}. */
    public Builder listener(IdemListener listener) {
      this.listener = listener;
      return this;
    }

    /**
     * How idem finds a framework's transaction open on this thread, so its calls join it; default
     * {@link TransactionBinding#NONE} (only {@link Idem#inTransaction} is joined).
     */
    public Builder transactionBinding(TransactionBinding binding) {
      this.binding = binding;
      return this;
    }

    /**
     * How often, and with which back-off, a transaction PostgreSQL refused with 40001, 40P01 or
     * 53200 is run again; default {@link RetryBudget#DEFAULT}, {@link RetryBudget#NONE} to surface
     * the first failure.
     */
    public Builder retries(RetryBudget retries) {
      this.retries = retries;
      return this;
    }

    /**
     * Where {@link Idem#outbox()} writes messages, so which relay carries them: {@link
     * OutboxLayout#POLLED} (the default: idem's {@link Relay}, or idem-kafka's) or {@link
     * OutboxLayout#DEBEZIUM} (Debezium's Outbox Event Router, configured by idem-debezium). Code
     * that enqueues is the same for both. A relay still drains the messages a switch to {@code
     * DEBEZIUM} left pending in {@code idem_outbox}.
     */
    public Builder outboxLayout(OutboxLayout layout) {
      this.outboxLayout = layout;
      return this;
    }

    /**
     * How long an executor or inbox answers a repeat from memory, taking no connection: the repeat
     * of a key it applied in a transaction of its own, or answered a repeat of from the database,
     * within this time and within the key's window. The answer is the one the database would give
     * (a completed row within its window never changes), except for a row changed or deleted by
     * hand, which every instance sees again within this time. Default {@link
     * Idem#DEFAULT_ANSWERS_FROM_MEMORY} (30 seconds); {@link Duration#ZERO} never answers from
     * memory (a test that empties idem's tables between cases and reuses keys wants this); at
     * most {@link Idem#MAX_ANSWERS_FROM_MEMORY}.
     */
    public Builder answersFromMemory(Duration kept) {
      this.answersFromMemory = kept;
      return this;
    }

    /**
     * Checks the settings and builds the {@code Idem}; touches no database.
     *
     * @throws IllegalArgumentException naming the setting: a schema that is null or not a plain
     *     lower-case identifier, a null listener, binding or retry budget, answers kept in memory
     *     null, negative or longer than {@link Idem#MAX_ANSWERS_FROM_MEMORY}
     */
    public Idem build() {
      if (schemaSet) {
        checkSchema(schema);
      }
      Require.notNull(listener, "listener (use IdemListener.NONE)");
      Require.notNull(binding, "transactionBinding (use TransactionBinding.NONE)");
      Require.notNull(retries, "retries (use RetryBudget.NONE)");
      Require.notNull(outboxLayout, "outboxLayout (use OutboxLayout.POLLED)");
      Require.notNull(answersFromMemory, "answersFromMemory (use Duration.ZERO for never)");
      if (answersFromMemory.isNegative() || answersFromMemory.compareTo(MAX_ANSWERS_FROM_MEMORY) > 0) {
        throw new IllegalArgumentException("answersFromMemory must be within 0 (never) and " + MAX_ANSWERS_FROM_MEMORY
            + ", was " + answersFromMemory);
      }
      return new Idem(this);
    }

    private static void checkSchema(String schema) {
      Identifiers.check("schema", schema);
      if (!schema.equals(schema.toLowerCase(Locale.ROOT))) {
        // Flyway creates the schema quoted, but the migrations name it unquoted, which PostgreSQL
        // folds to lower case: they would fail with "schema ... does not exist".
        throw new IllegalArgumentException("schema '" + schema + "' has upper-case letters; idem's migrations name"
            + " the schema unquoted, so PostgreSQL would fold it to lower case: use a lower-case name");
      }
    }
  }
}
