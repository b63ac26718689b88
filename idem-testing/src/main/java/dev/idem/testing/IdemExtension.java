package dev.idem.testing;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.flyway.IdemFlyway;
import java.lang.reflect.InvocationTargetException;
import javax.sql.DataSource;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionConfigurationException;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.platform.commons.support.AnnotationSupport;

/**
 * {@link IdemTest}'s extension: one {@link Fixture} per annotated class, kept in that class's
 * extension store so JUnit closes it (dropping the database) when the class is done.
 */
final class IdemExtension implements BeforeAllCallback, ParameterResolver {
  private static final ExtensionContext.Namespace NAMESPACE = ExtensionContext.Namespace.create(IdemExtension.class);
  /** Named, not linked: idem-jdbc's own tests use this module, so it cannot depend on idem-jdbc. */
  private static final String IDEM = "dev.idem.jdbc.Idem";
  /** Named too: loading TestKafka needs kafka-clients, which a test without Kafka does not have. */
  private static final String KAFKA = "dev.idem.testing.TestKafka";

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
    final TestDatabase db;
    final HikariDataSource pool;
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
      TestDatabase db = settings.logicalReplication() ? TestPostgres.newLogicalDatabase(hint) : TestPostgres.newDatabase(hint);
      try {
        HikariDataSource pool = db.dataSource(settings.poolSize());
        if (settings.migrate()) {
          requireIdemJdbc();
          IdemFlyway.migrate(pool, settings.schema());
        }
        for (String sql : settings.sql()) {
          db.execute(sql);
        }
        return new Fixture(db, pool, settings.schema());
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
          builder = builder.getClass().getMethod("schema", String.class).invoke(builder, schema);
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
