package dev.idem.examples;

import com.sun.net.httpserver.HttpExchange;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Base64;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import dev.idem.jdbc.reconcile.ProviderEffect;
import dev.idem.jdbc.reconcile.ProviderRecords;
import dev.idem.testing.TestDatabase;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.Record;
import org.jooq.impl.DSL;

/**
 * A stand-in for Stripe: another company's system, reached over HTTP, with its own key store (the
 * schema {@code provider}, or on MariaDB a database of its own, which the payments service never
 * touches) and a 24-hour retention.
 *
 * <ul>
 *   <li>{@code POST /v1/charges} with an {@code Idempotency-Key} header: the first request with a
 *       key charges the card; a repeat within 24 hours gets the first charge back with {@code
 *       Idempotent-Replayed: true}; a repeat with another body is refused (422). Past 24 hours the
 *       key is forgotten and a retry is a new charge. Without the header every request charges.
 *   <li>{@code GET /v1/charges?payment_ref=P}: the charges made for our reference, to look an outcome
 *       up instead of retrying blind.
 *   <li>Every new charge emits one event ({@code charge.succeeded}, its own event id) delivered to
 *       the merchant's webhook by a background sender, retried on a non-2xx answer, each delivery
 *       signed as Svix signs ({@code svix-id}: the event id, {@code svix-timestamp}, {@code
 *       svix-signature}) with {@link #WEBHOOK_SECRET}.
 *   <li>Its charges by creation time ({@link #effects}, as Stripe's {@code GET /v1/charges?created[gte]=..}):
 *       what reconciliation compares with the service's payments ({@link ProviderRecords}).
 * </ul>
 */
final class PaymentProvider implements AutoCloseable, ProviderRecords {
  /** How long the provider remembers a key (Stripe: "keys may be pruned once 24 hours old"). */
  static final Duration RETENTION = Duration.ofHours(24);
  /** The endpoint's signing secret, as the provider's dashboard shows it to the merchant. */
  static final String WEBHOOK_SECRET = "whsec_" + Base64.getEncoder().encodeToString(
      "the lab provider's webhook signing key".getBytes(StandardCharsets.UTF_8));

  private final DataSource dataSource;
  private final LabSql sql;
  /** MariaDB: the provider's own database, dropped on close; null on PostgreSQL. */
  private final TestDatabase own;
  private final Tally tally;
  private final Http.Server server;
  private final HttpClient client = Http.client();
  private final ExecutorService sender = Executors.newSingleThreadExecutor(r -> {
    Thread t = new Thread(r, "provider-webhooks");
    t.setDaemon(true);
    return t;
  });
  private final AtomicInteger sending = new AtomicInteger();
  private volatile URI webhook;

  private PaymentProvider(DataSource dataSource, LabSql sql, TestDatabase own, Tally tally) {
    this.dataSource = dataSource;
    this.sql = sql;
    this.own = own;
    this.tally = tally;
    createSchema();
    this.server = Http.serve("provider", Map.of("/v1/charges", this::charges));
  }

  /**
   * The provider, with a pool of {@code poolSize} connections of its own: on PostgreSQL to {@code
   * db}, its tables in schema {@code provider}; on MariaDB to a database of its own on {@code db}'s
   * server (a schema is a database there), dropped by {@link #close}, whose transactions run at READ
   * COMMITTED, PostgreSQL's default: a key looked for and not found takes no gap lock that a
   * competing request's insert of the same key would deadlock on.
   */
  static PaymentProvider open(TestDatabase db, int poolSize, Tally tally) {
    LabSql sql = LabSql.of(db);
    if (sql == LabSql.POSTGRESQL) {
      return new PaymentProvider(db.dataSource(poolSize), sql, null, tally);
    }
    TestDatabase own = TestDatabase.newDatabase("lab_provider");
    try {
      return new PaymentProvider(own.dataSource(poolSize, "TRANSACTION_READ_COMMITTED"), sql, own, tally);
    } catch (RuntimeException e) {
      own.close();
      throw e;
    }
  }

  URI chargesUri() {
    return server.uri("/v1/charges");
  }

  /** Where the provider delivers its events (the merchant configures it in the dashboard). */
  void webhook(URI uri) {
    this.webhook = uri;
  }

  private void createSchema() {
    try (Connection c = dataSource.getConnection()) {
      DSLContext dsl = DSL.using(c, sql.dialect());
      sql.providerTables().forEach(dsl::execute);
    } catch (SQLException e) {
      throw new IllegalStateException("could not create the provider's schema", e);
    }
  }

  private void charges(HttpExchange exchange) throws IOException {
    if (exchange.getRequestMethod().equals("GET")) {
      lookUp(exchange);
      return;
    }
    Map<String, String> form = Http.body(exchange);
    String key = exchange.getRequestHeaders().getFirst("Idempotency-Key");
    String paymentRef = form.getOrDefault("payment_ref", "");
    int amount = Integer.parseInt(form.getOrDefault("amount_cents", "0"));
    // What the key promises to mean: the same key with another request is a client bug (422).
    String request = "amount_cents=" + amount + "&payment_ref=" + paymentRef;
    ChargeResult result;
    try {
      result = charge(key, request, amount, paymentRef);
    } catch (SQLException e) {
      Http.respond(exchange, 500, Map.of(), Map.of("error", e.getMessage()));
      return;
    }
    switch (result.kind) {
      case CREATED -> {
        send(result.eventId);
        Http.respond(exchange, 200, Map.of(), Map.of("charge_id", result.chargeId));
      }
      case REPLAYED -> {
        tally.caught(Hop.PROVIDER, "provider replays charge " + result.chargeId + " for key " + abbreviate(key));
        Http.respond(exchange, 200, Map.of("Idempotent-Replayed", "true"), Map.of("charge_id", result.chargeId));
      }
      case KEY_REUSED -> Http.respond(exchange, 422, Map.of(),
          Map.of("error", "Keys for idempotent requests can only be used with the same parameters they were first used with"));
    }
  }

  private enum Kind { CREATED, REPLAYED, KEY_REUSED }

  private record ChargeResult(Kind kind, String chargeId, String eventId) {}

  private ChargeResult charge(String key, String request, int amount, String paymentRef) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      c.setAutoCommit(false);
      try {
        DSLContext dsl = DSL.using(c, sql.dialect());
        if (key != null) {
          // A key older than the retention is pruned: the provider no longer knows it.
          dsl.execute(sql.forgetKeyOlderThan(), key, sql.interval(RETENTION.toHours(), "hours"));
          String newCharge = "ch_" + UUID.randomUUID().toString().replace("-", "").substring(0, 16);
          int claimed = sql.claimKey(dsl, key, request, newCharge);
          if (claimed == 0) {
            Record first = dsl.fetchOne(sql.readKey(), key);
            c.commit();
            return first.get(0, String.class).equals(request)
                ? new ChargeResult(Kind.REPLAYED, first.get(1, String.class), null)
                : new ChargeResult(Kind.KEY_REUSED, null, null);
          }
          return create(c, dsl, newCharge, amount, paymentRef, key);
        }
        String newCharge = "ch_" + UUID.randomUUID().toString().replace("-", "").substring(0, 16);
        return create(c, dsl, newCharge, amount, paymentRef, null);
      } catch (SQLException | RuntimeException e) {
        c.rollback();
        throw e;
      }
    }
  }

  private ChargeResult create(Connection c, DSLContext dsl, String chargeId, int amount, String paymentRef, String key)
      throws SQLException {
    dsl.execute("INSERT INTO " + sql.provider("charges") + " (id, amount_cents, payment_ref, idempotency_key) VALUES (?, ?, ?, ?)",
        chargeId, amount, paymentRef, key);
    String eventId = "evt_" + UUID.randomUUID().toString().replace("-", "").substring(0, 16);
    dsl.execute("INSERT INTO " + sql.provider("events") + " (id, type, charge_id, payment_ref) VALUES (?, 'charge.succeeded', ?, ?)",
        eventId, chargeId, paymentRef);
    c.commit();
    return new ChargeResult(Kind.CREATED, chargeId, eventId);
  }

  private void lookUp(HttpExchange exchange) throws IOException {
    String query = exchange.getRequestURI().getRawQuery();
    String paymentRef = Http.decode(query).getOrDefault("payment_ref", "");
    try (Connection c = dataSource.getConnection()) {
      var ids = DSL.using(c, sql.dialect())
          .fetch("SELECT id FROM " + sql.provider("charges") + " WHERE payment_ref = ? ORDER BY created_at", paymentRef)
          .getValues(0, String.class);
      Http.respond(exchange, 200, Map.of(), Map.of("charge_ids", String.join(",", ids)));
    } catch (SQLException e) {
      Http.respond(exchange, 500, Map.of(), Map.of("error", e.getMessage()));
    }
  }

  /** Queues the delivery of one event, as the provider's webhook sender does. */
  private void send(String eventId) {
    sending.incrementAndGet();
    sender.execute(() -> {
      try {
        deliver(eventId);
        if (tally.fire(Hop.WEBHOOK, "provider delivers event " + eventId + " again (our 200 was too slow for it)")) {
          deliver(eventId);
        }
      } finally {
        sending.decrementAndGet();
      }
    });
  }

  private void deliver(String eventId) {
    if (webhook == null) {
      return; // no endpoint configured in the dashboard: the provider keeps its events
    }
    for (int attempt = 1; attempt <= 3; attempt++) {
      try (Connection c = dataSource.getConnection()) {
        DSLContext dsl = DSL.using(c, sql.dialect());
        Record event = dsl.fetchOne("SELECT type, charge_id, payment_ref FROM " + sql.provider("events") + " WHERE id = ?", eventId);
        dsl.execute("UPDATE " + sql.provider("events") + " SET deliveries = deliveries + 1 WHERE id = ?", eventId);
        Map<String, String> body = Map.of("type", event.get(0, String.class), "charge_id", event.get(1, String.class),
            "payment_ref", event.get(2, String.class));
        // Signed anew on every delivery, by the provider's clock, over the bytes Http.post sends.
        String timestamp = Long.toString(System.currentTimeMillis() / 1000);
        Http.Reply reply = Http.post(client, webhook, Map.of("svix-id", eventId, "svix-timestamp", timestamp,
            "svix-signature", "v1," + sign(eventId + "." + timestamp + "." + Http.encode(body))), body);
        if (reply.ok()) {
          return;
        }
      } catch (SQLException | IOException e) {
        // the merchant's endpoint or our own store hiccupped: retry, as real providers do
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  /**
   * The charges made from {@code from} to {@code to}, read from the provider's own table: each with
   * the idempotency key it was requested with (null without one) and the payment it was for (the
   * {@code payment_ref} the worker sends as metadata). The provider's clock is the database
   * server's, the same as idem's here.
   */
  @Override
  public List<ProviderEffect> effects(OffsetDateTime from, OffsetDateTime to) throws SQLException {
    boolean maria = sql == LabSql.MARIADB; // DATETIME(6) holding UTC there
    List<ProviderEffect> out = new ArrayList<>();
    try (Connection c = dataSource.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT id, idempotency_key, payment_ref, amount_cents, created_at FROM "
            + sql.provider("charges") + " WHERE created_at >= ? AND created_at < ? ORDER BY created_at")) {
      ps.setObject(1, maria ? from.withOffsetSameInstant(ZoneOffset.UTC).toLocalDateTime() : from);
      ps.setObject(2, maria ? to.withOffsetSameInstant(ZoneOffset.UTC).toLocalDateTime() : to);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          OffsetDateTime at = maria ? rs.getObject(5, LocalDateTime.class).atOffset(ZoneOffset.UTC) : rs.getObject(5, OffsetDateTime.class);
          out.add(new ProviderEffect(rs.getString(1), rs.getString(2), rs.getString(3), rs.getLong(4), at));
        }
      }
    }
    return out;
  }

  /** HMAC-SHA256 of {@code content} under the secret's key, in base64: Svix's v1 signature. */
  private static String sign(String content) {
    try {
      Mac mac = Mac.getInstance("HmacSHA256");
      mac.init(new SecretKeySpec(Base64.getDecoder().decode(WEBHOOK_SECRET.substring("whsec_".length())), "HmacSHA256"));
      return Base64.getEncoder().encodeToString(mac.doFinal(content.getBytes(StandardCharsets.UTF_8)));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("every JVM ships HmacSHA256", e);
    }
  }

  /** Ages the provider's keys by {@code by}, as if that much time had passed at the provider. */
  void age(Duration by) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      DSL.using(c, sql.dialect()).execute(sql.ageKeys(), sql.interval(by.toMinutes(), "minutes"));
    }
  }

  /** How many charges the provider made for {@code paymentRef}, read from its own tables. */
  int charges(String paymentRef) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      return DSL.using(c, sql.dialect())
          .fetchOne("SELECT count(*) FROM " + sql.provider("charges") + " WHERE payment_ref = ?", paymentRef).get(0, Integer.class);
    }
  }

  /** How many charges the provider made in all, read from its own tables. */
  int charges() throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      return DSL.using(c, sql.dialect()).fetchOne("SELECT count(*) FROM " + sql.provider("charges")).get(0, Integer.class);
    }
  }

  /** Waits until every queued webhook delivery has been attempted. */
  void awaitWebhooks(Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (sending.get() > 0) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the provider's webhooks did not drain in " + timeout);
      }
      Thread.sleep(5);
    }
  }

  static String abbreviate(String key) {
    return key == null ? "(none)" : key.length() <= 14 ? key : key.substring(0, 12) + "...";
  }

  @Override
  public void close() {
    server.close();
    sender.shutdownNow();
    try {
      sender.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      if (own != null) {
        own.close(); // its pool and the database go together
      }
    }
  }
}
