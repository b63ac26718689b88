package dev.idem.debezium;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.jdbc.outbox.OutboxLayout;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.nio.charset.StandardCharsets;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * The Debezium layout is PostgreSQL only (its events table and Debezium's PostgreSQL connector,
 * read by logical replication): on MariaDB, an {@code Idem} built with it refuses its first enqueue,
 * naming why and writing nothing, while the polled outbox on the same database works; and {@link
 * DebeziumOutbox} refuses to make a connector's settings for it.
 */
@IdemTest(vendors = TestDatabase.Vendor.MARIADB, vendorsReason = "what the Debezium layout does on MariaDB: refuse;"
    + " DebeziumOutboxTest relays it on PostgreSQL")
class DebeziumOnMariaDbTest {
  final TestDatabase db;
  final DataSource ds;

  DebeziumOnMariaDbTest(TestDatabase db, DataSource ds) {
    this.db = db;
    this.ds = ds;
  }

  static NewMessage message(String key) {
    return NewMessage.of("orders", "placed".getBytes(StandardCharsets.UTF_8)).withAggregateKey(key);
  }

  @Test
  void theDebeziumLayoutRefusesItsFirstEnqueueNamingPostgresqlAndWritesNothing() {
    Idem debezium = Idem.builder(ds).outboxLayout(OutboxLayout.DEBEZIUM).build();
    assertThatThrownBy(() -> debezium.inTransaction(tx -> debezium.outbox().enqueue(tx.connection(), message("o-1"))))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("OutboxLayout.DEBEZIUM is PostgreSQL only")
        .hasMessageContaining("MariaDB")
        .hasMessageContaining("Nothing was written");
    assertThat(db.count("SELECT count(*) FROM idem_outbox")).isZero();

    // The polled layout, on the same database, writes the message.
    Idem polled = Idem.builder(ds).build();
    polled.inTransaction(tx -> polled.outbox().enqueue(tx.connection(), message("o-2")));
    assertThat(db.count("SELECT count(*) FROM idem_outbox WHERE aggregate_key = 'o-2'")).isEqualTo(1);
  }

  @Test
  void debeziumOutboxRefusesAnIdemOnMariaDbNamingPostgresqlOnly() {
    Idem debezium = Idem.builder(ds).outboxLayout(OutboxLayout.DEBEZIUM).build();
    assertThatThrownBy(() -> DebeziumOutbox.builder(debezium))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageStartingWith("DebeziumOutbox is PostgreSQL only")
        .hasMessageContaining("idem's DataSource is on MariaDB")
        .hasMessageContaining("polled layout");
  }
}
