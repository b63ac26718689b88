package dev.idem.jdbc.executor;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import java.time.Duration;

/**
 * The process {@link ExternalCrashTest} kills: it claims an external effect, charges the provider
 * under the derived call key, says so on stdout, and then hangs in phase 2 until it is killed.
 * Arguments: JDBC URL, key scope, key value, lease in milliseconds.
 */
public final class ExternalChild {
  private ExternalChild() {}

  public static void main(String[] args) throws Exception {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(args[0]);
    config.setMaximumPoolSize(2);
    try (HikariDataSource ds = new HikariDataSource(config)) {
      IdempotentExecutor executor = Idem.builder(ds).build().executor()
          .lease(Duration.ofMillis(Long.parseLong(args[3]))).inFlightWait(Duration.ZERO).build();
      executor.executeExternal(IdempotencyKey.of(args[1], args[2]), Fingerprint.of("charge 42"), Codec.utf8(), a -> {
        String charge = Provider.charge(ds, a.callKey().value(), 42);
        System.out.println("CHARGED " + charge + " token " + a.token().value());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE); // phase 2 never ends: the kill comes first
        return charge;
      });
    }
    System.out.println("UNREACHABLE");
  }
}
