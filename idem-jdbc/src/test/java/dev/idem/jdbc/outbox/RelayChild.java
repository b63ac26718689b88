package dev.idem.jdbc.outbox;

import dev.idem.jdbc.Idem;
import java.sql.Connection;
import java.sql.PreparedStatement;
import com.zaxxer.hikari.HikariDataSource;

/**
 * A relay in its own JVM, for {@link RelayCrashTest}: its publisher records the message in the
 * {@code published} table (committed, as a broker would have it), says so on stdout, and then hangs
 * before the relay can mark the message sent, so the parent can kill the process right there.
 */
public final class RelayChild {
  public static void main(String[] args) throws Exception {
    HikariDataSource ds = new HikariDataSource();
    ds.setJdbcUrl(args[0]);
    ds.setMaximumPoolSize(2);
    Idem idem = Idem.builder(ds).build();
    try (Connection broker = ds.getConnection(); PreparedStatement ps = broker.prepareStatement("INSERT INTO published VALUES (?, 0)")) {
      broker.setAutoCommit(true);
      Relay relay = idem.relay(m -> {
        ps.setObject(1, m.id());
        ps.executeUpdate();
        System.out.println("PUBLISHED " + m.id());
        System.out.flush();
        Thread.sleep(120_000); // killed here, between publish and mark
      }).batchSize(1).build();
      relay.runOnce();
    }
    System.out.println("NOT KILLED");
  }
}
