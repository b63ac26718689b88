package dev.idem.testing;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A real database for a JUnit 5 test class, with idem's tables in it: one annotation, no set-up
 * code. PostgreSQL by default; MariaDB when the run chooses it ({@link TestDatabase} says how).
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
 * <p>Before the class's first test, the extension takes the run's server ({@link
 * TestDatabase#newDatabase}: PostgreSQL from {@code IDEM_JDBC_URL}, else Testcontainers, else an
 * embedded one; or MariaDB), creates a database of the class's own, runs idem's migrations in
 * {@link #schema()} and then {@link #sql()}. After the class's last test it closes the pools and
 * drops the database. A {@code @Nested} class shares its enclosing class's database, unless it is
 * annotated {@code @IdemTest} itself: then it gets one of its own, with its own settings.
 *
 * <p><b>On MariaDB</b> a schema is a database. With the default {@link #schema()}, idem's tables
 * are in the class's database itself, and the injected {@code Idem} is built without a schema (so
 * on the DataSource's own database). Another schema is a second database of the class's own, named
 * after the class's database and the schema (a database named as the schema alone would be shared
 * by every run on the server), dropped with it; the injected {@code Idem} is built on it, so a test
 * names its tables through {@code idem.schema()}, not by the schema's name. A class that only holds
 * on one database says so with {@link #vendors()}: on the others it is disabled, not failed.
 *
 * <p>Test constructors, lifecycle methods and test methods may declare parameters of these types,
 * all on that one database:
 *
 * <ul>
 *   <li>{@link TestDatabase}: the database, to read what was committed ({@link TestDatabase#count})
 *       and to make more pools;
 *   <li>{@link javax.sql.DataSource}: a HikariCP pool of {@link #poolSize()} connections;
 *   <li>{@link FaultyDataSource}: that pool behind the wrapper whose commits {@link Repeats} can
 *       kill (on PostgreSQL and MariaDB); build the code under test on it;
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

  /**
   * The schema idem's migrations run in, and the injected {@code Idem} uses. {@code idem} by
   * default, which on MariaDB is the class's database itself; another is, on MariaDB, a database
   * of the class's own (see above).
   */
  String schema() default "idem";

  /**
   * Whether idem's migrations run. True by default; false for a test that migrates itself (for
   * example with another layout), or that shows what happens without them.
   */
  boolean migrate() default true;

  /**
   * Whether the database must be on a server whose {@code wal_level} is {@code logical}, for change
   * data capture (Debezium): {@link TestPostgres#logicalReplication()}. False by default. True
   * makes the class PostgreSQL only, whatever {@link #vendors()} says.
   */
  boolean logicalReplication() default false;

  /**
   * The databases the class runs on; both by default. On a run whose database is not among them
   * (a MariaDB run for {@code vendors = TestDatabase.Vendor.POSTGRESQL}) the whole class is
   * disabled, reported as skipped with the reason "PostgreSQL only: " and {@link
   * #vendorsReason()}, and no database is made for it.
   */
  TestDatabase.Vendor[] vendors() default {TestDatabase.Vendor.POSTGRESQL, TestDatabase.Vendor.MARIADB};

  /**
   * Why the class runs only on {@link #vendors()}: what it relies on that the others lack (e.g.
   * {@code "LISTEN/NOTIFY"}), shown in the reason it is disabled. Empty by default.
   */
  String vendorsReason() default "";
}
