package dev.idem.jdbc.notify;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.flyway.IdemFlyway;
import dev.idem.jdbc.Idem;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A sender process killed (SIGKILL) after its message went out and before its record: while it
 * lives its claim stops the redelivery; once its lease ends, the direction of failure decides.
 */
class NotificationCrashTest {
  static final long LEASE_MILLIS = 1500;
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start() {
    db = TestPostgres.newDatabase("notify_crash");
    ds = db.dataSource(4);
    idem = Idem.builder(ds).build();
    IdemFlyway.migrate(ds);
    db.execute("CREATE TABLE sends (notification_id text NOT NULL, channel text NOT NULL, recipient text NOT NULL,"
        + " collapse_id text NOT NULL, takeover boolean NOT NULL)");
  }

  @AfterAll
  static void stop() {
    db.close();
  }

  static long sends(String id) {
    return db.count("SELECT count(*) FROM sends WHERE notification_id = ?", id);
  }

  @ParameterizedTest
  @EnumSource(Delivery.class)
  void aKilledSenderIsRepeatedOrLostAsItsTypeChose(Delivery delivery) throws Exception {
    String id = "otp-crash-" + delivery;
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process child = new ProcessBuilder(java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", System.getProperty("java.class.path"),
        NotifyChild.class.getName(), db.jdbcUrl(), delivery.name(), id, Long.toString(LEASE_MILLIS))
        .redirectError(ProcessBuilder.Redirect.INHERIT)
        .start();
    Notifications codes = idem.notifications("login-code").delivery(delivery).lease(Duration.ofMillis(LEASE_MILLIS)).build();
    Notification n = Notification.of(id, "sms", "+15550002");
    try {
      BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
      assertThat(out.readLine()).isEqualTo("SENT " + id);
      // The sender lives: its claim stops the redelivery (at most once: its record already says so).
      SendResult whileAlive = codes.send(n, o -> {
        throw new AssertionError("sent while the first sender lives");
      });
      assertThat(whileAlive).isInstanceOf(delivery == Delivery.AT_LEAST_ONCE_MAY_REPEAT
          ? SendResult.InFlight.class : SendResult.Duplicate.class);
      child.destroyForcibly(); // SIGKILL: no shutdown hook, no finally, no record
      assertThat(child.waitFor(10, TimeUnit.SECONDS)).isTrue();
    } finally {
      child.destroyForcibly();
    }
    assertThat(child.exitValue()).isEqualTo(137); // 128 + SIGKILL
    assertThat(sends(id)).isEqualTo(1);
    db.execute("SELECT pg_sleep(" + (LEASE_MILLIS + 200) / 1000.0 + ")"); // the lease ends by the database clock

    SendResult redelivered = codes.send(n, o -> {
      try (var c = ds.getConnection(); var ps = c.prepareStatement("INSERT INTO sends VALUES (?, 'sms', ?, ?, ?)")) {
        ps.setString(1, id);
        ps.setString(2, o.notification().recipient());
        ps.setString(3, o.collapseId());
        ps.setBoolean(4, o.takeover());
        ps.executeUpdate();
      }
    });
    if (delivery == Delivery.AT_LEAST_ONCE_MAY_REPEAT) {
      // Sent, then died before "sent" was recorded: the redelivery takes over and sends again.
      assertThat(redelivered).isEqualTo(new SendResult.Sent(Notifications.collapseId(id), true));
      assertThat(sends(id)).isEqualTo(2);
      assertThat(db.count("SELECT fence FROM idem.idem_keys WHERE key = ?", id)).isEqualTo(2);
    } else {
      // "Sending" was recorded before the send: nothing sends it again.
      assertThat(redelivered).isInstanceOf(SendResult.Duplicate.class);
      assertThat(sends(id)).isEqualTo(1);
    }
    assertThat(db.count("SELECT count(DISTINCT collapse_id) FROM sends WHERE notification_id = ?", id)).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem.idem_keys WHERE key = ? AND state = 'C'", id)).isEqualTo(1);
  }
}
