package dev.idem.jdbc.outbox;

import dev.idem.jdbc.Idem;
import java.io.PrintStream;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import com.zaxxer.hikari.HikariDataSource;

/**
 * A relay in a JVM of its own, for {@link RelayCrashTest}: its publisher records the message in
 * publish_log (the "broker" has it), prints {@code PUBLISHED <id>} and then hangs before the relay
 * can mark the message sent, so the parent can kill this JVM between publish and mark.
 *
 * <p>Arguments: JDBC URL, idem schema.
 */
public final class CrashingRelayMain {
  public static void main(String[] args) throws Exception {
    String url = args[0];
    HikariDataSource ds = new HikariDataSource();
    ds.setJdbcUrl(url);
    ds.setMaximumPoolSize(2);
    Idem idem = Idem.builder(ds).schema(args[1]).build();
    PrintStream out = System.out;
    try (Connection broker = DriverManager.getConnection(url)) {
      broker.setAutoCommit(true);
      Relay relay = idem.relay(m -> {
        try (PreparedStatement ps = broker.prepareStatement("INSERT INTO publish_log (id, attempt) VALUES (?, ?)")) {
          ps.setObject(1, m.id());
          ps.setInt(2, m.attempt());
          ps.executeUpdate();
        }
        out.println("PUBLISHED " + m.id());
        out.flush();
        Thread.sleep(120_000); // the parent kills us here, before the mark
      }).batchSize(1).build();
      relay.runOnce();
    }
    out.println("NOT KILLED");
  }
}
