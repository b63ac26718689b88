package dev.idem.spring.boot;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.idem.event.IdemListener;
import dev.idem.http.IdempotencyKeyFilter;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.executor.OutcomeCompleter;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.outbox.Outbox;
import dev.idem.jdbc.outbox.Publisher;
import dev.idem.jdbc.outbox.Relay;
import dev.idem.jdbc.reconcile.EffectTable;
import dev.idem.jdbc.reconcile.ProviderRecords;
import dev.idem.jdbc.reconcile.Reconciliation;
import dev.idem.jdbc.tx.TransactionBinding;
import dev.idem.spring.AfterCommitListener;
import dev.idem.spring.IdemExceptionTranslator;
import dev.idem.spring.RelayLifecycle;
import dev.idem.spring.SpringTransactionBinding;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadFactory;
import java.util.function.LongSupplier;
import java.util.stream.Stream;
import javax.sql.DataSource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Role;
import org.springframework.core.env.Environment;
import org.springframework.core.task.VirtualThreadTaskExecutor;

/**
 * idem on the application's DataSource, with Spring's transaction as idem's (see {@link
 * SpringTransactionBinding}). Every bean here backs off when the application defines its own of the
 * same type. See docs/spring.md for the properties.
 */
@AutoConfiguration(afterName = {
    "org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration",
    "org.springframework.boot.autoconfigure.jdbc.DataSourceTransactionManagerAutoConfiguration",
    "org.springframework.boot.autoconfigure.flyway.FlywayAutoConfiguration",
    "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration",
    "org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration",
    "org.springframework.boot.flyway.autoconfigure.FlywayAutoConfiguration"})
@ConditionalOnClass(Idem.class)
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties(IdemProperties.class)
@Import(IdemToolsRegistrar.class)
public class IdemAutoConfiguration {
  private static final Logger LOG = LoggerFactory.getLogger(IdemAutoConfiguration.class);

  /** Spring's transaction on this DataSource as idem's. */
  @Bean
  @ConditionalOnMissingBean
  public TransactionBinding idemTransactionBinding(DataSource dataSource) {
    return new SpringTransactionBinding(dataSource);
  }

  /**
   * idem's tables, created or updated at start-up ({@code idem.migrate.enabled}), when Flyway is on
   * the class path (the starter brings idem-flyway without it).
   */
  @Bean
  @ConditionalOnMissingBean
  @ConditionalOnClass(name = {"dev.idem.flyway.IdemFlyway", "org.flywaydb.core.Flyway"})
  @ConditionalOnProperty(prefix = "idem.migrate", name = "enabled", matchIfMissing = true)
  public IdemMigrations idemMigrations(DataSource dataSource, IdemProperties properties) {
    return new IdemMigrations(SpringTransactionBinding.unwrap(dataSource), properties.getSchema(),
        properties.getMigrate().getLayout());
  }

  /**
   * The entry point, on the DataSource's target (never a {@code TransactionAwareDataSourceProxy}:
   * idem joins Spring's transaction through the binding, and commits its own on a plain connection).
   */
  @Bean
  @ConditionalOnMissingBean
  public Idem idem(DataSource dataSource, TransactionBinding binding, IdemProperties properties,
      ObjectProvider<IdemListener> listeners, ObjectProvider<IdemMigrations> migrations) {
    DataSource target = SpringTransactionBinding.unwrap(dataSource);
    if (migrations.getIfAvailable() == null && properties.getMigrate().isEnabled()) {
      requireTables(target, properties.getSchema()); // no idem-flyway: fail at start-up, not at the first call
    }
    Idem.Builder b = Idem.builder(target);
    if (properties.getSchema() != null) {
      // Unset, the builder's own default: idem on PostgreSQL, the DataSource's database on MariaDB.
      b.schema(properties.getSchema());
    }
    return b.transactionBinding(binding)
        .listener(new AfterCommitListener(listeners.orderedStream().toList()))
        .outboxLayout(properties.getOutboxLayout())
        .answersFromMemory(properties.getAnswersFromMemory())
        .build();
  }

  /**
   * Refuses start-up, saying how to get them, if idem's tables are not where {@code schema} (null:
   * the default) puts them: PostgreSQL's catalog, MariaDB's information_schema.
   */
  private static void requireTables(DataSource dataSource, String schema) {
    StartupDatabase db;
    boolean found;
    String where;
    String table;
    try (Connection c = dataSource.getConnection()) {
      db = StartupDatabase.of(c);
      if (db.requireSupported() == StartupDatabase.Vendor.POSTGRESQL) {
        String s = schema != null ? schema : Idem.DEFAULT_SCHEMA;
        where = "schema " + s;
        table = s + ".idem_keys";
        found = exists(c, "SELECT to_regclass(?) IS NOT NULL", table);
      } else {
        // A schema is a database on MariaDB: idem.schema names one, else the connections' own.
        String database = db.databaseFor(schema);
        where = schema != null ? "schema " + schema + " (a database on MariaDB)" : "the DataSource's database " + database;
        table = database + ".idem_keys";
        found = exists(c, "SELECT count(*) > 0 FROM information_schema.tables WHERE table_schema = ? AND table_name = 'idem_keys'",
            database);
      }
      if (!c.getAutoCommit()) {
        c.rollback(); // a pool in manual commit: end the check's transaction
      }
    } catch (SQLException e) {
      throw new IllegalStateException("could not check for idem's tables in " + (schema != null ? "schema " + schema
          : "the default schema") + ": " + e.getMessage(), e);
    }
    if (found) {
      return;
    }
    StartupDatabase.Vendor vendor = db.vendor();
    throw new IdemSetupException("idem's tables are not in " + where + " (no " + table + ")", "To create them at"
        + " start-up, put Flyway on the class path (" + vendor.flywayModule + ") with idem's migrations (the"
        + " starter brings dev.idem:idem-flyway without Flyway; if you excluded it, add the dependency dev.idem:idem-flyway),"
        + " or run idem's migrations (" + vendor.migrations() + ") with your own tool and set idem.migrate.enabled=false.");
  }

  private static boolean exists(Connection c, String sql, String arg) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      ps.setString(1, arg);
      try (ResultSet rs = ps.executeQuery()) {
        return rs.next() && rs.getBoolean(1);
      }
    }
  }

  /**
   * {@code @Idempotent} on the methods of the application's beans (not controllers': see {@link
   * IdemHttpAutoConfiguration}), run through idem executors; {@code idem.aop.enabled=false} turns
   * it off. Static and infrastructure, as Spring's own advisors: the auto-proxy creator makes it
   * early, and it looks the {@code Idem} bean up only at the first call.
   */
  @Bean
  @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
  @ConditionalOnProperty(prefix = "idem.aop", name = "enabled", matchIfMissing = true)
  static IdempotentMethods idemIdempotentMethods(ObjectProvider<Idem> idem, ObjectProvider<ObjectMapper> mappers,
      Environment environment) {
    return new IdempotentMethods(idem, mappers, environment);
  }

  /** The transactional outbox. */
  @Bean
  @ConditionalOnMissingBean
  public Outbox idemOutbox(Idem idem) {
    return idem.outbox();
  }

  /** idem's data-access errors as Spring's {@code DataAccessException}s, from {@code @Repository} beans. */
  @Bean
  @ConditionalOnMissingBean
  public IdemExceptionTranslator idemExceptionTranslator(DataSource dataSource) {
    return new IdemExceptionTranslator(dataSource);
  }

  /** The relay of the outbox to the application's {@link Publisher}, started and stopped with the context. */
  @Bean
  @ConditionalOnBean(Publisher.class)
  @ConditionalOnMissingBean
  @ConditionalOnProperty(prefix = "idem.relay", name = "enabled", matchIfMissing = true)
  public RelayLifecycle idemRelay(Idem idem, Publisher publisher, IdemProperties properties, Environment environment,
      @Qualifier("idemRelayThreadFactory") ObjectProvider<ThreadFactory> threads) {
    IdemProperties.RelayProperties p = properties.getRelay();
    Relay.Builder b = idem.relay(publisher)
        .batchSize(p.getBatchSize())
        .pollInterval(p.getPollInterval())
        .maxAttempts(p.getMaxAttempts())
        .backoff(p.getBackoffInitial(), p.getBackoffMax())
        .orderedByAggregateKey(p.isOrdered())
        .retention(p.getRetention())
        .listen(p.isListen())
        .shutdownTimeout(p.getShutdownTimeout());
    ThreadFactory mine = threads.getIfAvailable();
    boolean virtual = p.getVirtualThreads() != null ? p.getVirtualThreads()
        : environment.getProperty("spring.threads.virtual.enabled", Boolean.class, false);
    if (mine != null) {
      b.threadFactory(mine);
    } else if (virtual) {
      if (Runtime.version().feature() < 21) {
        throw new IllegalStateException("idem.relay.virtual-threads (or spring.threads.virtual.enabled) needs Java 21+,"
            + " this is Java " + Runtime.version().feature());
      }
      b.threadFactory(new VirtualThreadTaskExecutor("idem-relay-").getVirtualThreadFactory());
    }
    return new RelayLifecycle(b.build(), true);
  }

  /**
   * The expiry of every executor, inbox and Idempotency-Key filter bean ({@code idem.expiry.*}),
   * and the partitioned layout's maintenance (nothing to do in the default layout).
   */
  @Bean
  @ConditionalOnProperty(prefix = "idem.expiry", name = "enabled", matchIfMissing = true)
  ExpirySchedule idemExpirySchedule(ObjectProvider<IdempotentExecutor> executors, ObjectProvider<Inbox> inboxes,
      ObjectProvider<IdempotencyKeyFilter> filters, ObjectProvider<Idem> idem, ObjectProvider<IdempotentMethods> methods,
      IdemProperties properties) {
    return new ExpirySchedule(() -> Stream.of(
            idem.orderedStream().map(Idem::operations).<LongSupplier>map(ops -> () -> ops.maintainPartitions().dropped()),
            executors.orderedStream().<LongSupplier>map(e -> e::expire),
            methods.orderedStream().flatMap(m -> m.executors().stream()).<LongSupplier>map(e -> e::expire),
            inboxes.orderedStream().<LongSupplier>map(i -> i::expire),
            filters.orderedStream().<LongSupplier>map(f -> f::expire))
        .flatMap(s -> s).toList(), properties.getExpiry().getInterval());
  }

  /** How far back the scheduled lineage check looks, at least (the interval when longer). */
  static final Duration LINEAGE_LOOK_BACK = Duration.ofHours(1);

  /**
   * The scheduled checks ({@code idem.checks.*}, off by default): each effect table reconciled with
   * idem's keys, one instance of the fleet per interval. Backs off when the application defines a
   * bean named {@code idemChecks}.
   */
  @Bean
  @ConditionalOnMissingBean(name = "idemChecks")
  @ConditionalOnProperty(prefix = "idem.checks", name = "enabled", havingValue = "true")
  IdemChecks idemChecks(Idem idem, DataSource dataSource, IdemProperties properties, ListableBeanFactory beans) {
    IdemProperties.Checks p = properties.getChecks();
    List<ScheduledCheck> checks = new ArrayList<>();
    p.getEffectTables().forEach((name, t) -> checks.add(ScheduledCheck.reconcile(name, idem.reconciliation(),
        effectTable(name, t), provider(name, t, beans), t.getProviderRange())));
    // Two message ids for one intent, at every inbox and the outbox (the intents idem stamped),
    // looking back an hour at least, so a finding stays in the gauge for longer than a short interval.
    if (p.isLineage()) {
      Duration lookBack = p.getInterval().compareTo(LINEAGE_LOOK_BACK) > 0 ? p.getInterval() : LINEAGE_LOOK_BACK;
      checks.add(ScheduledCheck.lineage(idem.lineage(), lookBack));
    }
    // Every OutcomeCompleter the application defines (it knows the codec, the Resolver and the scopes).
    beans.getBeansOfType(OutcomeCompleter.class).forEach((name, completer) -> checks.add(ScheduledCheck.complete(name, completer)));
    // Further checks (one ScheduledCheck each) go here: they run in turn under the same lease.
    if (checks.isEmpty()) {
      LOG.info("idem.checks.enabled is true and no check is configured (idem.checks.effect-tables.<name>.key-column,"
          + " idem.checks.lineage, or an OutcomeCompleter bean)");
    }
    List<ScheduledCheck> all = List.copyOf(checks);
    return new IdemChecks(() -> all, idem.leases(), SpringTransactionBinding.unwrap(dataSource), p.getLeaseResource(),
        p.getInterval());
  }

  /**
   * The {@code ProviderRecords} bean {@code idem.checks.effect-tables.<name>.provider} names, or
   * null when it names none.
   *
   * @throws IllegalArgumentException naming the property, if no such bean exists or the range is out of bounds
   */
  static ProviderRecords provider(String name, IdemProperties.EffectTableProperties t, ListableBeanFactory beans) {
    String at = "idem.checks.effect-tables." + name;
    if (t.getProvider() == null) {
      return null;
    }
    Duration range = t.getProviderRange();
    if (range == null || range.isNegative() || range.isZero() || range.compareTo(Reconciliation.MAX_PROVIDER_RANGE) > 0) {
      throw new IllegalArgumentException(at + ".provider-range must be positive and at most "
          + Reconciliation.MAX_PROVIDER_RANGE + ", was " + range);
    }
    Map<String, ProviderRecords> providers = beans.getBeansOfType(ProviderRecords.class);
    ProviderRecords provider = providers.get(t.getProvider());
    if (provider == null) {
      throw new IllegalArgumentException(at + ".provider is '" + t.getProvider() + "', which names no ProviderRecords bean"
          + " (the application's ProviderRecords beans: " + providers.keySet() + ")");
    }
    return provider;
  }

  /**
   * The reconciliation's view of {@code idem.checks.effect-tables.<name>}.
   *
   * @throws IllegalArgumentException naming the property that is missing or not a plain name
   */
  static EffectTable effectTable(String name, IdemProperties.EffectTableProperties t) {
    String at = "idem.checks.effect-tables." + name;
    if (t.getKeyColumn() == null) {
      throw new IllegalArgumentException(at + ".key-column is required: the column holding each effect's intent key");
    }
    try {
      EffectTable table = EffectTable.of(t.getTable() != null ? t.getTable() : name, t.getKeyColumn());
      if (t.getSchema() != null) {
        table = table.inSchema(t.getSchema());
      }
      if (t.getReferenceColumn() != null) {
        table = table.withReference(t.getReferenceColumn());
      }
      return t.getScope() != null ? table.withScope(t.getScope()) : table;
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(at + ": " + e.getMessage() + (t.getTable() == null ? " (the table is the entry's"
          + " name unless " + at + ".table is set)" : ""), e);
    }
  }
}
