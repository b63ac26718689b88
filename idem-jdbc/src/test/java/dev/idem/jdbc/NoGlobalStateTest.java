package dev.idem.jdbc;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.flyway.IdemFlyway;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import java.util.Objects;
import java.util.TimeZone;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * A library does not touch global state: building an {@link Idem} and running calls sets no system
 * property. Run in a JVM of its own, so that idem-jdbc's classes are first loaded (and initialized)
 * after the properties were read: in this test JVM another test may have loaded them already.
 * (idem-flyway's migration is run before: Flyway itself sets a property, see {@link Child}.)
 */
@IdemTest(migrate = false, sql = "CREATE TABLE payments (order_id text NOT NULL, amount int NOT NULL)")
class NoGlobalStateTest {

  @Test
  void buildingIdemAndRunningCallsSetsNoSystemProperty(TestDatabase db) throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process child = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), Child.class.getName(), db.jdbcUrl())
        .redirectErrorStream(true)
        .start();
    boolean exited = child.waitFor(60, TimeUnit.SECONDS);
    String out = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (!exited) {
      child.destroyForcibly();
    }
    assertThat(exited).as("the child JVM exited within 60 s: " + out).isTrue();
    assertThat(child.exitValue()).as(out).isZero();
    assertThat(out).contains("applied=true replayed=true").contains("properties changed: {}");

    // the calls did run: one payment row and one key row
    assertThat(db.count("SELECT count(*) FROM payments")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys")).isEqualTo(1);
  }

  /** The child JVM: reads the properties, then builds idem, runs a call and its repeat, and prints what changed. */
  static final class Child {
    public static void main(String[] args) throws Exception {
      javax.sql.DataSource ds;
      if (args[0].startsWith("jdbc:mariadb:")) {
        ds = new org.mariadb.jdbc.MariaDbDataSource(args[0]);
      } else {
        PGSimpleDataSource pg = new PGSimpleDataSource();
        pg.setURL(args[0]);
        ds = pg;
      }
      // Set before idem runs, by others: the JDK sets user.timezone when the default zone is first
      // read, and Flyway's JdbcUtils sets polyglot.engine.WarnInterpreterOnly when first loaded.
      TimeZone.getDefault();
      IdemFlyway.migrate(ds);
      Map<String, String> before = properties();

      Execution<String> first = QuickStart.pay(ds);   // builds an Idem, runs a call
      Execution<String> repeat = QuickStart.pay(ds);  // and its repeat

      Map<String, String> after = properties();
      Map<String, String> changed = new TreeMap<>();
      after.forEach((k, v) -> {
        if (!Objects.equals(before.get(k), v)) {
          changed.put(k, v);
        }
      });
      before.keySet().stream().filter(k -> !after.containsKey(k)).forEach(k -> changed.put(k, "(removed)"));
      System.out.println("applied=" + first.applied() + " replayed=" + repeat.replayed());
      System.out.println("properties changed: " + changed);
    }

    private static Map<String, String> properties() {
      Map<String, String> copy = new TreeMap<>();
      System.getProperties().forEach((k, v) -> copy.put(String.valueOf(k), String.valueOf(v)));
      return copy;
    }
  }
}
