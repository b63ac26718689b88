package dev.idem.jdbc.notify;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import java.time.Duration;

/**
 * The sender {@code NotificationsTest} kills: it sends one notification, writes its send to
 * {@code sends} (committed: the message went out), says so on stdout, and then hangs inside the
 * send until it is killed. Arguments: JDBC URL, delivery, notification id, lease in milliseconds.
 */
public final class NotifyChild {
  private NotifyChild() {}

  public static void main(String[] args) throws Exception {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(args[0]);
    config.setMaximumPoolSize(2);
    try (HikariDataSource ds = new HikariDataSource(config)) {
      Notifications codes = Idem.builder(ds).build().notifications("login-code")
          .delivery(Delivery.valueOf(args[1])).lease(Duration.ofMillis(Long.parseLong(args[3]))).build();
      codes.send(new Notification(args[2], "sms", "+15550002"), out -> {
        Sends.into(ds).send(out);
        System.out.println("SENT " + out.notification().id());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE); // the record never comes: the kill comes first
      });
    }
    System.out.println("UNREACHABLE");
  }
}
