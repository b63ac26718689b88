package dev.idem.testing;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.flyway.IdemFlyway;
import java.lang.reflect.InvocationTargetException;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.Set;
import java.util.stream.Collectors;
import javax.sql.DataSource;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ConditionEvaluationResult;
import org.junit.jupiter.api.extension.ExecutionCondition;
import org.junit.jupiter.api.extension.ExtensionConfigurationException;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.platform.commons.support.AnnotationSupport;

/**
 * {@link IdemTest}'s extension: one {@link Fixture} per annotated class, kept in that class's
 * extension store so JUnit closes it (dropping the database) when the class is done; and the
 * condition that disables a class on a database it does not run on, before any fixture is made.
 */
final class IdemExtension implements ExecutionCondition, BeforeAllCallback, ParameterResolver {
  private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(IdemExtension.class);
  /** Named, not linked: idem-jdbc's own tests use this module, so it cannot depend on idem-jdbc. */
  private static final String IDEM = "dev.idem.jdbc.Idem";
  /** Named too: loading TestKafka needs kafka-clients, which a test without Kafka does not have. */
  private static final String KAFKA = "dev.idem.testing.TestKafka";

  /**
   * Disabled on a run whose database is not among the nearest annotated class's {@link
   * IdemTest#vendors()} (PostgreSQL only when it asks for logical replication). Evaluated for the
   * class before anything starts, so a disabled class makes no database.
   */
  @Override
  public ConditionEvaluationResult evaluateExecutionCondition(ExtensionContext context) {
    ExtensionContext owner = context;
    while (!isAnnotatedClass(owner)) {
      ExtensionContext parent = owner.getParent().filter(p -> p.getTestClass().isPresent()).orElse(null);
      if (parent == null) {
        return ConditionEvaluationResult.enabled("not in an @IdemTest class");
      }
      owner = parent;
    }
    IdemTest settings = AnnotationSupport.findAnnotation(owner.getRequiredTestClass(), IdemTest.class).orElseThrow();
    Set<TestDatabase.Vendor> vendors = vendors(settings);
    TestDatabase.Vendor running = TestDatabase.configuredVendor();
    if (vendors.contains(running)) {
      return ConditionEvaluationResult.enabled("runs on " + running);
    }
    String why = !settings.vendorsReason().isBlank() ? settings.vendorsReason()
        : settings.logicalReplication() ? "logical replication (wal_level=logical)" : "";
    String only = vendors.stream().map(TestDatabase.Vendor::toString).collect(Collectors.joining(" and ")) + " only";
    return ConditionEvaluationResult.disabled(why.isEmpty() ? only : only + ": " + why);
  }

  /** The databases a class runs on: its {@code vendors}, less MariaDB for logical replication. */
  private static Set<TestDatabase.Vendor> vendors(IdemTest settings) {
    Set<TestDatabase.Vendor> vendors = vendors(settings.vendors());
    if (vendors.isEmpty()) {
      throw new ExtensionConfigurationException("@IdemTest(vendors = {}): name at least one database the class runs on");
    }
    if (settings.logicalReplication()) {
      vendors.retainAll(EnumSet.of(TestDatabase.Vendor.POSTGRESQL));
      if (vendors.isEmpty()) {
        throw new ExtensionConfigurationException("@IdemTest(logicalReplication = true) needs PostgreSQL, which vendors leaves out");
      }
    }
    return vendors;
  }

  private static Set<TestDatabase.Vendor> vendors(TestDatabase.Vendor[] named) {
    return named.length == 0 ? EnumSet.noneOf(TestDatabase.Vendor.class) : EnumSet.copyOf(Arrays.asList(named));
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    fixture(context); // start before the first test, so its time is not charged to a test
  }

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    Class<?> type = parameter.getParameter().getType();
    return type == TestDatabase.class || type == DataSource.class || type == FaultyDataSource.class || type.getName().equals(KAFKA)
        || type.getName().equals(IDEM);
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    Fixture fixture = fixture(context);
    Class<?> type = parameter.getParameter().getType();
    if (type == TestDatabase.class) {
      return fixture.db;
    }
    if (type == DataSource.class) {
      return fixture.pool;
    }
    if (type == FaultyDataSource.class) {
      return fixture.faulty();
    }
    if (type.getName().equals(KAFKA)) {
      return fixture.kafka();
    }
    return fixture.idem(type);
  }

  /** The fixture of the nearest enclosing class annotated {@link IdemTest}, started on first use. */
  private static Fixture fixture(ExtensionContext context) {
    ExtensionContext owner = context;
    while (!isAnnotatedClass(owner)) {
      owner = owner.getParent().filter(p -> p.getTestClass().isPresent()).orElseThrow(
          () -> new ExtensionConfigurationException("@IdemTest's extension used on a class not annotated @IdemTest"));
    }
    IdemTest settings = AnnotationSupport.findAnnotation(owner.getRequiredTestClass(), IdemTest.class).orElseThrow();
    String hint = owner.getRequiredTestClass().getSimpleName();
    // Keyed by the annotated class: a store also answers from its parents', so a key shared by all
    // classes would hand an annotated @Nested class its enclosing class's database.
    return owner.getStore(NAMESPACE).getOrComputeIfAbsent(owner.getRequiredTestClass(), k -> Fixture.start(hint, settings), Fixture.class);
  }

  private static boolean isAnnotatedClass(ExtensionContext context) {
    return context.getTestMethod().isEmpty() && context.getTestClass()
        .map(c -> AnnotationSupport.isAnnotated(c, IdemTest.class)).orElse(false);
  }

  /** A class's database, pool and what is built on them; closing it drops the database. */
  static final class Fixture implements AutoCloseable {
    /** IdemTest's default schema: on MariaDB, the class's database itself. */
    private static final String DEFAULT_SCHEMA = "idem";

    final TestDatabase db;
    final HikariDataSource pool;
    /** The schema the injected Idem is built on; null for the builder's default (MariaDB's own database). */
    private final String schema;
    private Object idem;
    private FaultyDataSource faulty;
    private AutoCloseable kafka; // a TestKafka, typed so that a test without Kafka never loads it

    private Fixture(TestDatabase db, HikariDataSource pool, String schema) {
      this.db = db;
      this.pool = pool;
      this.schema = schema;
    }

    static Fixture start(String hint, IdemTest settings) {
      if (settings.poolSize() < 1) {
        throw new ExtensionConfigurationException("@IdemTest(poolSize = " + settings.poolSize() + "): a pool needs at least 1 connection");
      }
      TestDatabase db = settings.logicalReplication() ? TestPostgres.newLogicalDatabase(hint) : TestDatabase.newDatabase(hint);
      try {
        HikariDataSource pool = db.dataSource(settings.poolSize());
        // On MariaDB a schema is a database: the default is the class's own, another a second one of its own.
        String schema = db.vendor() == TestDatabase.Vendor.POSTGRESQL ? settings.schema()
            : settings.schema().equals(DEFAULT_SCHEMA) ? null : db.schemaDatabase(settings.schema());
        if (settings.migrate()) {
          requireIdemJdbc();
          IdemFlyway.migrate(pool, schema);
        }
        for (String sql : settings.sql()) {
          db.execute(sql);
        }
        return new Fixture(db, pool, schema);
      } catch (RuntimeException e) {
        db.close();
        throw e;
      }
    }

    /** idem's migrations are resources of idem-jdbc: without it Flyway would find none and say nothing. */
    private static void requireIdemJdbc() {
      try {
        Class.forName(IDEM, false, IdemExtension.class.getClassLoader());
      } catch (ClassNotFoundException e) {
        throw new ExtensionConfigurationException("@IdemTest(migrate = true) needs idem-jdbc on the test class path:"
            + " idem's migrations are in it (or set migrate = false)");
      }
    }

    synchronized Object idem(Class<?> idemType) {
      if (idem == null) {
        try {
          Object builder = idemType.getMethod("builder", DataSource.class).invoke(null, pool);
          if (schema != null) {
            builder = builder.getClass().getMethod("schema", String.class).invoke(builder, schema);
          }
          idem = builder.getClass().getMethod("build").invoke(builder);
        } catch (InvocationTargetException e) {
          throw new ParameterResolutionException("could not build an Idem on the test database: " + e.getCause(), e.getCause());
        } catch (ReflectiveOperationException e) {
          throw new ParameterResolutionException("this idem-testing does not match the idem-jdbc on the class path", e);
        }
      }
      return idem;
    }

    synchronized FaultyDataSource faulty() {
      if (faulty == null) {
        faulty = FaultyDataSource.wrap(pool);
      }
      return faulty;
    }

    synchronized Object kafka() {
      if (kafka == null) {
        kafka = TestKafka.start();
      }
      return kafka;
    }

    @Override
    public synchronized void close() {
      try {
        if (kafka != null) {
          kafka.close();
        }
      } catch (Exception e) {
        throw new IllegalStateException("could not stop the test's Kafka broker", e);
      } finally {
        db.close();
      }
    }
  }
}
