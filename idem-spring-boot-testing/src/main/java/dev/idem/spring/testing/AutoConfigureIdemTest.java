package dev.idem.spring.testing;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * idem's test support in a Spring Boot test, from one annotation next to {@code @SpringBootTest}:
 *
 * <pre>{@code
 * @SpringBootTest(webEnvironment = WebEnvironment.RANDOM_PORT)
 * @AutoConfigureIdemTest
 * class PaymentsTest {
 *   @Autowired TestDatabase db;   // the application's database, to read what was committed
 * }
 * }</pre>
 *
 * <ul>
 *   <li>The application's {@code spring.datasource.url} is a fresh database of its own on the
 *       run's server ({@link dev.idem.testing.TestDatabase#newDatabase}): PostgreSQL ({@code
 *       IDEM_JDBC_URL}, else Testcontainers, else an embedded PostgreSQL) by default, MariaDB when
 *       {@code IDEM_TEST_DATABASE=mariadb} or {@code IDEM_JDBC_URL} is a MariaDB URL (else the
 *       local server, else an embedded MariaDB), overriding any URL the test's properties set. The
 *       application's own migrations (Flyway, and idem's through the starter) run in it as they
 *       would in production: migrations that differ per database go in a folder per database,
 *       {@code spring.flyway.locations=classpath:db/migration/{vendor}}, which Boot's Flyway fills
 *       in ({@code postgresql}, {@code mariadb}). It is dropped when Spring closes the context.
 *   <li>{@link dev.idem.testing.TestDatabase} is a bean, for reading what the application
 *       committed.
 * </ul>
 *
 * <p>Test classes whose configuration is otherwise the same share one cached context, and with it
 * one database: each test uses keys and business ids of its own.
 */
@Documented
@Inherited
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
public @interface AutoConfigureIdemTest {}
