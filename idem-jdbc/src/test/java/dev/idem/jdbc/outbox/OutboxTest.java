package dev.idem.jdbc.outbox;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.testing.TestDatabase;
import dev.idem.testing.TestPostgres;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class OutboxTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start() {
    db = TestPostgres.newDatabase("outbox");
    ds = db.dataSource(4);
    idem = Idem.builder(ds).schema("obx").build();
    idem.migrate();
  }

  @AfterAll
  static void stop() {
    db.close();
  }

  static long rows(String where) throws SQLException {
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT count(*) FROM obx.idem_outbox WHERE " + where)) {
      rs.next();
      return rs.getLong(1);
    }
  }

  @Test
  void enqueueWritesTheMessageInTheCallersTransactionWithAUuidV7() throws Exception {
    NewMessage m = NewMessage.of("orders.shipped", "{\"order\":42}".getBytes(StandardCharsets.UTF_8))
        .withAggregateKey("order-42").withHeader("type", "OrderShipped").withHeader("trace", "t-1");
    UUID id = idem.inTransaction(tx -> idem.outbox().enqueue(tx, m));
    assertThat(id.version()).isEqualTo(7);
    assertThat(id.variant()).isEqualTo(2);
    try (Connection c = ds.getConnection(); Statement st = c.createStatement();
        ResultSet rs = st.executeQuery("SELECT topic, aggregate_key, payload, header_names, header_values, status, attempts"
            + " FROM obx.idem_outbox WHERE id = '" + id + "'")) {
      assertThat(rs.next()).isTrue();
      assertThat(rs.getString(1)).isEqualTo("orders.shipped");
      assertThat(rs.getString(2)).isEqualTo("order-42");
      assertThat(new String(rs.getBytes(3), StandardCharsets.UTF_8)).isEqualTo("{\"order\":42}");
      assertThat((String[]) rs.getArray(4).getArray()).containsExactly("type", "trace");
      assertThat((String[]) rs.getArray(5).getArray()).containsExactly("OrderShipped", "t-1");
      assertThat(rs.getString(6)).isEqualTo("P");
      assertThat(rs.getInt(7)).isZero();
    }
  }

  @Test
  void aRolledBackTransactionLeavesNoMessage() throws Exception {
    long before = rows("topic = 'rolled.back'");
    try (Connection c = ds.getConnection()) {
      c.setAutoCommit(false);
      idem.outbox().enqueue(c, NewMessage.of("rolled.back", new byte[] {1}));
      DSLContext dsl = idem.dsl(c);
      idem.outbox().enqueue(dsl, NewMessage.of("rolled.back", new byte[] {2}));
      assertThat(rows("topic = 'rolled.back'")).isEqualTo(before); // not visible before commit
      c.rollback();
      c.setAutoCommit(true);
    }
    assertThat(rows("topic = 'rolled.back'")).isEqualTo(before);
  }

  @Test
  void idsFromOneJvmStrictlyIncrease() {
    List<UUID> ids = new ArrayList<>();
    for (int i = 0; i < 20_000; i++) {
      ids.add(UuidV7.next());
    }
    for (int i = 1; i < ids.size(); i++) {
      assertThat(ids.get(i).compareTo(ids.get(i - 1))).isPositive();
      assertThat(ids.get(i).version()).isEqualTo(7);
    }
    long ms = ids.get(0).getMostSignificantBits() >>> 16;
    assertThat(ms).isBetween(System.currentTimeMillis() - 60_000, System.currentTimeMillis() + 60_000);
  }

  @Test
  void badInputIsRefusedAndWritesNothing() throws Exception {
    long before = rows("true");
    assertThatThrownBy(() -> NewMessage.of(null, new byte[0])).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("topic");
    assertThatThrownBy(() -> NewMessage.of(" ", new byte[0])).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("topic");
    assertThatThrownBy(() -> NewMessage.of("t", null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("payload");
    assertThatThrownBy(() -> NewMessage.of("t", new byte[0]).withHeader(null, "v")).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("header");
    assertThatThrownBy(() -> NewMessage.of("t", new byte[0]).withHeader("h", null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("header");
    assertThatThrownBy(() -> NewMessage.of("t", new byte[0]).withAggregateKey("")).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("aggregate key");
    assertThatThrownBy(() -> idem.useTransaction(tx -> idem.outbox().enqueue(tx, null)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("message");
    assertThatThrownBy(() -> idem.outbox().enqueue((Connection) null, NewMessage.of("t", new byte[0])))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("callerTx");
    assertThatThrownBy(() -> idem.outbox().redrive(null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("id");
    assertThatThrownBy(() -> idem.relay(m -> {}).batchSize(0).build()).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("batchSize");
    assertThatThrownBy(() -> idem.relay(m -> {}).maxAttempts(0).build()).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("maxAttempts");
    assertThatThrownBy(() -> idem.relay(null)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("publisher");
    assertThat(rows("true")).isEqualTo(before);
  }

  @Test
  void thePayloadIsCopied() {
    byte[] bytes = {1, 2, 3};
    NewMessage m = NewMessage.of("t", bytes);
    bytes[0] = 9;
    assertThat(m.payload()).containsExactly(1, 2, 3);
    assertThat(m.withHeader("a", "1").headers()).isEqualTo(Map.of("a", "1"));
    assertThat(m.headers()).isEmpty();
  }
}
