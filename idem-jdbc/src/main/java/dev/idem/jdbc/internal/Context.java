package dev.idem.jdbc.internal;

import dev.idem.event.IdemListener;
import dev.idem.jdbc.tx.RetryBudget;
import dev.idem.jdbc.tx.TransactionBinding;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.tx.TxCallback;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.BooleanSupplier;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.conf.MappedSchema;
import org.jooq.conf.RenderMapping;
import org.jooq.conf.Settings;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * What every tool of one {@code Idem} shares, and the one place idem's transactions are decided:
 * the {@code DataSource}, the schema mapping for rendering SQL, the listener, the {@link
 * TransactionBinding} and the {@link RetryBudget}. Tools are built over it and never call back into
 * {@code Idem}. Not an API.
 */
public final class Context {
  /** The schema idem's SQL is written against; a configured schema is mapped to at render time. */
  public static final String DEFAULT_SCHEMA = "idem";

  private final DataSource dataSource;
  private final String schema;
  private final IdemListener listener;
  private final TransactionBinding binding;
  private final RetryBudget retries;
  /** Whether the schema was named on the builder: on MariaDB an unnamed one is the connection's database. */
  private final boolean schemaNamed;
  private volatile Dialect dialect;
  /** On MariaDB with no schema named: the DataSource's database, where idem's tables are. */
  private volatile String database;
  private volatile Settings settings;
  private volatile DSLContext detached;
  private final ThreadLocal<Tx> open = new ThreadLocal<>();
  /** How long a guard answers a repeat of a key it applied or read from memory (zero: never). */
  private final Duration answersFromMemory;
  /** One instance at a time, over idem's leases; set once by {@code Idem}. */
  private volatile Alone alone = Alone.NONE;

  /**
   * @param schema idem's schema, or null for the default: {@link #DEFAULT_SCHEMA} on PostgreSQL, the
   *     connection's own database on MariaDB (where a schema is a database)
   */
  public Context(DataSource dataSource, String schema, IdemListener listener, TransactionBinding binding,
      RetryBudget retries, Duration answersFromMemory) {
    this.answersFromMemory = answersFromMemory;
    this.dataSource = dataSource;
    this.schemaNamed = schema != null;
    this.schema = schema == null ? DEFAULT_SCHEMA : schema;
    this.listener = listener;
    this.binding = binding;
    this.retries = retries;
  }

  /**
   * The database this context's {@code DataSource} is on, asked of the driver on first use (the
   * builder touches no database) and remembered.
   */
  public Dialect dialect() {
    Dialect known = dialect;
    if (known != null) {
      return known;
    }
    try (Connection c = dataSource.getConnection()) {
      return dialect(c);
    } catch (SQLException e) {
      throw AutoCommit.noConnection("could not tell which database idem's DataSource is on", e);
    }
  }

  /**
   * {@link #dialect()}, asked of {@code c}, a connection of this context's {@code DataSource} at
   * hand, if not known yet: a first call that holds a connection already takes no second one (on
   * a pool of one, or one all callers hold, it would wait for itself until the pool's timeout).
   */
  public Dialect dialect(Connection c) {
    Dialect known = dialect;
    if (known == null) {
      synchronized (this) {
        known = dialect;
        if (known == null) {
          try {
            known = Dialect.of(c);
            if (known == Dialect.MARIADB && !schemaNamed) {
              database = c.getCatalog(); // the connection's database, which holds idem's tables
            }
          } catch (SQLException e) {
            throw new DataAccessException("could not tell which database idem's DataSource is on: " + e.getMessage(), e);
          }
          // On MariaDB an unnamed schema is the connection's database: idem's names render
          // unqualified there, so every statement finds the tables in the database it runs in.
          Settings s = new Settings().withExecuteLogging(false);
          if (known == Dialect.POSTGRES || schemaNamed) {
            // The default schema is the one idem's SQL names already: no mapping then, which would
            // render the same SQL, and which jOOQ looks up for every table it renders (the caller's
            // statements of the statements forms are rendered on every call).
            if (!DEFAULT_SCHEMA.equals(schema)) {
              s = s.withRenderMapping(new RenderMapping().withSchemata(new MappedSchema().withInput(DEFAULT_SCHEMA).withOutput(schema)));
            }
          } else {
            s = s.withRenderSchema(false);
          }
          settings = s;
          detached = DSL.using(known.jooq(), s);
          dialect = known;
        }
      }
    }
    return known;
  }

  /** True on MariaDB: for the few places whose SQL is not rendered through {@link #dsl}. */
  public boolean mariadb() {
    return dialect() == Dialect.MARIADB;
  }

  /** How long a guard answers a repeat of a key it applied or read from memory; zero: never. */
  /** Wires in idem's leases (by {@code Idem}, once, as it is built). */
  public void alone(Alone alone) {
    this.alone = alone;
  }

  /** One instance at a time over idem's leases. */
  public Alone alone() {
    return alone;
  }

  public Duration answersFromMemory() {
    return answersFromMemory;
  }

  /** Whether the key table is partitioned (the layout chosen at migration); asked once, lazily. */
  private volatile Boolean partitioned;

  /**
   * Whether idem's tables are in the partitioned layout (docs/scale.md), where whole partitions
   * expire instead of rows: asked of the database the first time, then remembered. Only expiry
   * needs to know; every claim statement is the same in both layouts.
   */
  public boolean partitioned() {
    Boolean known = partitioned;
    if (known == null) {
      known = !mariadb() && AutoCommit.run(dataSource, "idem layout", c -> {
        try (var ps = c.prepareStatement("select exists (select 1 from pg_partitioned_table where partrelid = to_regclass(?))")) {
          ps.setString(1, keyTable());
          try (var rs = ps.executeQuery()) {
            rs.next();
            return rs.getBoolean(1);
          }
        }
      });
      partitioned = known;
    }
    return known;
  }

  public DataSource dataSource() {
    return dataSource;
  }

  /**
   * The schema idem's SQL is rendered against: as named, else {@link #DEFAULT_SCHEMA} (on MariaDB
   * with none named, names render unqualified, so it is never sent).
   */
  public String schema() {
    return schema;
  }

  /**
   * Where idem's tables are: the schema named, else PostgreSQL's default, else (MariaDB) the
   * DataSource's database, asked of the database on first use.
   */
  public String tablesSchema() {
    if (schemaNamed) {
      return schema;
    }
    return dialect() == Dialect.MARIADB && database != null ? database : schema;
  }

  public IdemListener listener() {
    return listener;
  }

  /** A jOOQ context with no connection, for rendering SQL once. */
  public DSLContext dsl() {
    dialect();
    return detached;
  }

  /** A jOOQ context on {@code c}, with idem's schema mapping. */
  public DSLContext dsl(Connection c) {
    return DSL.using(c, dialect().jooq(), settings);
  }

  /**
   * The transaction open on this thread: idem's own ({@code inTransaction}), else the binding's;
   * null if none.
   */
  public Tx current() {
    Tx own = open.get();
    if (own != null) {
      return own;
    }
    Connection bound = binding.currentConnection();
    if (bound == null) {
      return null;
    }
    if (autoCommit(bound, "the transaction binding's connection")) {
      // Checked before anything is written: a savepoint would fail with PostgreSQL's own message,
      // and a write would commit at once, apart from the framework's work.
      throw new IllegalStateException("the TransactionBinding " + binding.getClass().getName() + " handed idem a"
          + " connection in auto-commit mode, so idem's rows would commit alone, apart from the framework's work:"
          + " a binding must return the connection of an open transaction (auto-commit off), or null when none is open");
    }
    requireTables(bound);
    return new JoinedTx(this, bound, null);
  }

  /** Whether {@code c} is in auto-commit mode; {@code whose} names it in the error. */
  private static boolean autoCommit(Connection c, String whose) {
    try {
      return c.getAutoCommit();
    } catch (SQLException e) {
      throw new DataAccessException("could not read " + whose + "'s auto-commit mode: " + e.getMessage(), e);
    }
  }

  /** True if {@code tx} is a transaction idem itself opened (and will commit) on this thread. */
  public boolean owns(Tx tx) {
    return tx != null && open.get() == tx;
  }

  /**
   * The caller's transaction on {@code callerTx}, checked: not null, auto-commit off, not aborted.
   *
   * @param what names the call's key or message for the messages, e.g. {@code "key s/k"}
   * @throws IllegalArgumentException naming {@code callerTx} and what is wrong with it
   */
  public Tx joined(Connection callerTx, String what) {
    if (callerTx == null) {
      throw new IllegalArgumentException("callerTx must not be null");
    }
    if (autoCommit(callerTx, "callerTx")) {
      throw new IllegalArgumentException("callerTx is in auto-commit mode, so " + what + " would commit alone:"
          + " pass a connection with an open transaction (setAutoCommit(false)), or call the form without a"
          + " connection to let idem own the transaction");
    }
    Driver.refuseUnjoinable(callerTx, what);
    requireTables(callerTx);
    Tx own = open.get();
    return own != null && own.connection() == callerTx ? own : new JoinedTx(this, callerTx, null);
  }

  /**
   * Runs {@code work} in the transaction open on this thread, or in a transaction of idem's own,
   * run again under the {@link RetryBudget} when PostgreSQL refuses it with 40001, 40P01 or 53200.
   */
  public <T, X extends Exception> T inTransaction(TxCallback<T, X> work) throws X {
    Tx joined = current();
    if (joined != null) {
      return work.apply(joined);
    }
    return owned(work);
  }

  /** {@code work} in a transaction of idem's own, under the retry budget, even if one is open here. */
  public <T, X extends Exception> T owned(TxCallback<T, X> work) throws X {
    return owned(work, () -> true);
  }

  /**
   * {@link #owned(TxCallback)} for a guard whose claim comes before the caller's code: {@code
   * callerRan} says whether the run that failed had reached it (see {@link Runs}).
   */
  public <T, X extends Exception> T owned(TxCallback<T, X> work, BooleanSupplier callerRan) throws X {
    Runs runs = new Runs();
    while (true) {
      try {
        return ownedOnce(work);
      } catch (Exception e) {
        if (!runs.again(e, callerRan.getAsBoolean())) {
          throw e;
        }
      }
    }
  }

  /** A new count of failed runs under this context's budget. */
  public Runs runs() {
    return new Runs();
  }

  /**
   * The failed runs of one call, and the one rule for running it again. A run that failed with
   * 40001, 40P01 or 53200 after the caller's code ran counts against {@link RetryBudget#maxRuns}:
   * the caller's code runs at most that many times. One that failed before any caller code ran (a
   * claim that waited for another copy, which then committed: the next run answers from that
   * copy's row) does not, and is run again at most {@link #MAX_RACES} times. Each waits the
   * budget's back-off first.
   */
  public final class Runs {
    /** Runs lost to other copies' claims before any caller code ran, at most, for one call. */
    public static final int MAX_RACES = 10;
    private int failed;
    private int raced;

    private Runs() {}

    /** True (having waited the back-off) to run again after {@code e}; false to throw it. */
    public boolean again(Throwable e, boolean callerRan) {
      if (!SqlStates.isRetryable(e)) {
        return false;
      }
      if (!callerRan) {
        return ++raced <= MAX_RACES && pause(raced);
      }
      return ++failed < retries.maxRuns() && pause(failed);
    }
  }

  /**
   * {@code work} in a transaction of idem's own, run once; open on this thread while it runs, so
   * idem calls inside it join it. It runs the caller's code: the binding lends it to the caller's
   * framework ({@link TransactionBinding#ownTransaction}).
   */
  public <T, X extends Exception> T ownedOnce(TxCallback<T, X> work) throws X {
    return ownedOnce(binding, work);
  }

  /**
   * {@link #ownedOnce} for work that runs none of the caller's code (idem's statements only): no
   * framework is told of it.
   */
  public <T, X extends Exception> T ownedOnceByIdem(TxCallback<T, X> work) throws X {
    return ownedOnce(TransactionBinding.NONE, work);
  }

  private <T, X extends Exception> T ownedOnce(TransactionBinding lender, TxCallback<T, X> work) throws X {
    return OwnTransaction.run(dataSource, lender, (c, ending) -> {
      if (!tablesFound) {
        requireTables(c);
        try {
          c.rollback(); // the look began idem's transaction: the work's first statement may have to be a SET TRANSACTION
        } catch (SQLException e) {
          throw new DataAccessException("could not roll back after looking for idem's tables: " + e.getMessage(), e);
        }
      }
      Tx tx = new JoinedTx(this, c, ending);
      Tx outer = open.get();
      open.set(tx);
      try {
        return work.apply(tx);
      } finally {
        // set back, not removed: a get() of a missing entry (every call's current()) inserts one
        // holding null, so a remove() here would have the map drop and re-insert it on every call
        open.set(outer);
      }
    });
  }

  /**
   * To be called by work in {@link #ownedOnce} that commits {@code tx} itself (a statement ending
   * in {@code COMMIT}), just before: the binding's veto ({@link TransactionBinding.Lent#beforeCommit}).
   * Nothing for a transaction idem joined.
   */
  public void beforeCommit(Tx tx) {
    if (tx instanceof JoinedTx j) {
      j.beforeCommit();
    }
  }

  /**
   * To be called by work in {@link #ownedOnce} once its statement ending in {@code COMMIT}
   * succeeded: the binding is then told the transaction committed, whatever fails after.
   */
  public void committed(Tx tx) {
    if (tx instanceof JoinedTx j) {
      j.committed();
    }
  }

  /** Statements on a connection of their own in auto-commit mode, run once. */
  public <R> R autoCommitOnce(String what, AutoCommit.Work<R> work) {
    return AutoCommit.run(dataSource, what, checked(work));
  }

  private <R> AutoCommit.Work<R> checked(AutoCommit.Work<R> work) {
    return c -> {
      requireTables(c);
      return work.run(c);
    };
  }

  /** The key table's name in {@link #schema}, quoted where needed, for {@code to_regclass}. */
  private String keyTable() {
    return DSL.using(SQLDialect.POSTGRES).render(DSL.name(schema, "idem_keys"));
  }

  /** Where idem's tables are looked for, for messages. */
  private String where() {
    return dialect == Dialect.MARIADB && !schemaNamed ? "the DataSource's database" : "schema '" + schema + "'";
  }

  /** PostgreSQL's undefined_table. */
  private static final String UNDEFINED_TABLE = "42P01";

  /**
   * Runs {@code work} on a connection from the pool that is in auto-commit with no transaction
   * open, idem's tables checked: for one statement that begins and ends its own transaction
   * (MariaDB's compound statement, the statements form's one round trip). Null, and nothing run,
   * if the connection is not in auto-commit or has a transaction open: the call then takes {@link
   * #ownedOnce}'s way, which refuses the latter. The work's {@link SQLException} is thrown as it is.
   */
  public <R> R ownStatement(AutoCommit.Work<R> work) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      if (!c.getAutoCommit() || Driver.inTransaction(c)) {
        return null;
      }
      requireTables(c);
      return work.run(c);
    }
  }

  /** Whether idem's tables were found in {@link #schema}: looked for once, at the first call. */
  private volatile boolean tablesFound;

  /**
   * Refuses the first call if idem's tables are not in {@link #schema} (the schema named twice, at
   * the migration and on the builder, with nothing else tying the two), looking on {@code c}, the
   * connection at hand: a read that changes nothing in the caller's transaction. Once found, never
   * asked again.
   *
   * @throws DataAccessException naming the schema and how to migrate it, SQLSTATE 42P01
   */
  private void requireTables(Connection c) {
    if (tablesFound) {
      return;
    }
    boolean maria = dialect(c) == Dialect.MARIADB;
    String table = keyTable();
    try (var ps = c.prepareStatement(maria
        ? "select count(*) > 0 from information_schema.tables where table_schema = coalesce(?, database()) and table_name = 'idem_keys'"
        : "select to_regclass(?) is not null")) {
      ps.setString(1, maria ? (schemaNamed ? schema : null) : table);
      try (var rs = ps.executeQuery()) {
        rs.next();
        if (!rs.getBoolean(1)) {
          String message = "idem's tables are not in " + where() + " (no " + table + "): migrate"
              + " that schema before the first call, with IdemFlyway.migrate(dataSource, \"" + schema + "\") (module"
              + " idem-flyway) or with your own Flyway over Idem.MIGRATIONS and that schema as its default schema; or"
              + " build Idem with .schema(...) naming the schema you migrated";
          // SQLSTATE 42P01, as the missing table would give: translators (Spring's) see the same error.
          throw new DataAccessException(message, new SQLException(message, UNDEFINED_TABLE));
        }
      }
    } catch (SQLException e) {
      throw new DataAccessException("could not look for idem's tables in " + where() + ": " + e.getMessage(), e);
    }
    tablesFound = true;
  }

  /**
   * Statements on a connection of their own in auto-commit mode, run again under the retry
   * budget: only for statements that may run again as a whole (reads; writes whose 40001 wrote
   * nothing).
   */
  public <R> R autoCommit(String what, AutoCommit.Work<R> work) {
    Runs runs = new Runs();
    while (true) {
      try {
        return AutoCommit.run(dataSource, what, checked(work));
      } catch (DataAccessException e) {
        if (!runs.again(e, false)) { // idem's own statements: no caller code ran
          throw e;
        }
      }
    }
  }

  /**
   * Waits the budget's back-off after {@code attempt} failed attempts; false if interrupted (the
   * interrupt is kept). For retries that the budget bounds differently, such as a claim's lost race.
   */
  public boolean pause(int attempt) {
    Duration wait = backoff(retries, attempt);
    if (!wait.isZero()) {
      try {
        Thread.sleep(wait.toMillis(), wait.toNanosPart() % 1_000_000);
      } catch (InterruptedException interrupted) {
        Thread.currentThread().interrupt();
        return false;
      }
    }
    return true;
  }

  /**
   * The wait before run {@code run + 1}, after {@code run} runs failed (1 or more): a uniform
   * random time between zero and {@code min(maxBackoff, firstBackoff * 2^(run - 1))} of {@code budget}.
   */
  static Duration backoff(RetryBudget budget, int run) {
    long first = budget.firstBackoff().toNanos();
    if (first == 0) {
      return Duration.ZERO;
    }
    long cap = budget.maxBackoff().toNanos();
    long ceiling = run - 1 >= 62 || first > (cap >> Math.min(62, run - 1)) ? cap : Math.min(cap, first << (run - 1));
    return Duration.ofNanos(ThreadLocalRandom.current().nextLong(ceiling + 1));
  }
}
