package dev.idem.testing;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A real PostgreSQL for a JUnit 5 test class, with idem's tables in it: one annotation, no set-up
 * code.
 *
 * <pre>{@code
 * @IdemTest(sql = "CREATE TABLE payments (order_id text NOT NULL, amount int NOT NULL)")
 * class PaymentsTest {
 *   @Test
 *   void oneChargePerOrder(Idem idem, TestDatabase db) {
 *     // ... call your code through idem, then read what was committed:
 *     assertEquals(1, db.count("SELECT count(*) FROM payments WHERE order_id = ?", "o-1"));
 *   }
 * }
 * }</pre>
 *
 * <p>Before the class's first test, the extension takes the {@link TestPostgres} server (from
 * {@code IDEM_JDBC_URL}, else Testcontainers, else an embedded PostgreSQL), creates a database of
 * the class's own, runs idem's migrations in {@link #schema()} and then {@link #sql()}. After the
 * class's last test it closes the pools and drops the database. A {@code @Nested} class shares its
 * enclosing class's database, unless it is annotated {@code @IdemTest} itself: then it gets one of
 * its own, with its own settings.
 *
 * <p>Test constructors, lifecycle methods and test methods may declare parameters of these types,
 * all on that one database:
 *
 * <ul>
 *   <li>{@link TestDatabase}: the database, to read what was committed ({@link TestDatabase#count})
 *       and to make more pools;
 *   <li>{@link javax.sql.DataSource}: a HikariCP pool of {@link #poolSize()} connections;
 *   <li>{@link FaultyDataSource}: that pool behind the wrapper whose commits {@link Repeats} can
 *       kill; build the code under test on it;
 *   <li>{@code dev.idem.jdbc.Idem}: {@code Idem.builder(dataSource).schema(schema()).build()} on
 *       that pool, one per class (idem-jdbc must be on the test class path); build your own from the
 *       {@code DataSource} when a test needs other settings;
 *   <li>{@link TestKafka}: an in-process Kafka broker of the class's own, started on first use
 *       (kafka-clients and kafka_2.13 must be on the test class path).
 * </ul>
 *
 * <p>Rows live as long as the class: tests in one class see each other's rows, so each test uses
 * keys of its own. Not for a Spring application context's DataSource: a Spring Boot test gets its
 * database from the Spring module's test support instead.
 */
@Documented
@Inherited
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
@ExtendWith(IdemExtension.class)
public @interface IdemTest {
  /**
   * SQL run once after idem's migrations, in order, each entry one or more statements separated by
   * semicolons: the tables that stand for the service's own. None by default.
   */
  String[] sql() default {};

  /** The size of the injected pool. 10 by default. */
  int poolSize() default 10;

  /** The schema idem's migrations run in, and the injected {@code Idem} uses. {@code idem} by default. */
  String schema() default "idem";

  /**
   * Whether idem's migrations run. True by default; false for a test that migrates itself (for
   * example with another layout), or that shows what happens without them.
   */
  boolean migrate() default true;

  /**
   * Whether the database must be on a server whose {@code wal_level} is {@code logical}, for change
   * data capture (Debezium): {@link TestPostgres#logicalReplication()}. False by default.
   */
  boolean logicalReplication() default false;
}
