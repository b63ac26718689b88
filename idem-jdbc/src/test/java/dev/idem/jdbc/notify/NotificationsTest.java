package dev.idem.jdbc.notify;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.event.IdemEvent;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.Racers;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.key.Keys;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Poll;
import dev.idem.testing.Race;
import dev.idem.testing.RecordingListener;
import dev.idem.testing.TestDatabase;
import dev.idem.window.DedupeWindow;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Bounded notifications on a real PostgreSQL or MariaDB. The sender is a real effect: it writes
 * one row per send to {@code sends}, in a transaction of its own, and the tests count those rows.
 */
@IdemTest(poolSize = 16)
class NotificationsTest {
  static TestDatabase db;
  static DataSource ds;
  static Idem idem;

  @BeforeAll
  static void start(TestDatabase database, DataSource pool, Idem injected) {
    db = database;
    ds = pool;
    idem = injected;
    db.execute(Sends.table(mariadb()));
  }

  static boolean mariadb() {
    return db.vendor() == TestDatabase.Vendor.MARIADB;
  }

  /** Now by the database clock, in SQL, comparable with idem's times (MariaDB's are UTC DATETIMEs). */
  static String now() {
    return mariadb() ? "utc_timestamp(6)" : "clock_timestamp()";
  }

  /** Waits {@code seconds} on the database's side, so what follows runs later by the database clock. */
  static void sleepOnTheDatabase(double seconds) {
    db.execute(mariadb() ? "SELECT SLEEP(" + seconds + ")" : "SELECT pg_sleep(" + seconds + ")");
  }

  /** The recording sender: one committed row per message handed to it. */
  static void record(Outgoing out) throws SQLException {
    Sends.into(ds).send(out);
  }

  static long sends(String id) {
    return Sends.of(db, id);
  }

  static Notifications receipts(Delivery delivery) {
    return idem.notifications("receipt-email").delivery(delivery).build();
  }

  @Test
  void racingRedeliveriesSendOnce() throws Exception {
    for (Delivery delivery : Delivery.values()) {
      Notifications receipts = receipts(delivery);
      String id = "race-" + delivery;
      Notification n = new Notification(id, "email", "order-1");
      List<SendResult> results = Race.together(12, i -> receipts.send(n, NotificationsTest::record));
      assertThat(results.stream().filter(r -> r instanceof SendResult.Sent)).as(delivery.name()).hasSize(1);
      assertThat(results).allSatisfy(r -> assertThat(r).isInstanceOfAny(SendResult.Sent.class,
          SendResult.Duplicate.class, SendResult.InFlight.class));
      assertThat(sends(id)).as(delivery.name()).isEqualTo(1);
      // Once recorded, every redelivery is a duplicate.
      assertThat(receipts.send(n, NotificationsTest::record)).isInstanceOf(SendResult.Duplicate.class);
      assertThat(sends(id)).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'notify/email' AND idem_keys.key = ?", id)).isEqualTo(1);
    }
  }

  @Test
  void theSameIdOnAnotherChannelIsAnotherMessage() throws Exception {
    Notifications shipped = idem.notifications("shipped").delivery(Delivery.AT_LEAST_ONCE_MAY_REPEAT).build();
    assertThat(shipped.send(new Notification("shipped-42", "push", "u1"), NotificationsTest::record)).isInstanceOf(SendResult.Sent.class);
    assertThat(shipped.send(new Notification("shipped-42", "sms", "u1"), NotificationsTest::record)).isInstanceOf(SendResult.Sent.class);
    assertThat(shipped.send(new Notification("shipped-42", "push", "u1"), NotificationsTest::record)).isNotInstanceOf(SendResult.Sent.class);
    assertThat(sends("shipped-42")).isEqualTo(2);
    // One collapse id for the intent, derived with idem-core's key derivation, on every channel.
    String expected = Keys.child(IdempotencyKey.of("notify", "shipped-42"), "collapse").value();
    assertThat(Notifications.collapseId("shipped-42")).isEqualTo(expected).hasSize(64);
    assertThat(db.count("SELECT count(DISTINCT collapse_id) FROM sends WHERE notification_id = 'shipped-42'"
        + " AND collapse_id = ?", expected)).isEqualTo(1);
  }

  @Test
  void aLiveSenderStopsARedeliveryAndADeadOneLetsItThrough() throws Exception {
    Notifications codes = idem.notifications("login-code").delivery(Delivery.AT_LEAST_ONCE_MAY_REPEAT)
        .lease(Duration.ofSeconds(2)).build();
    Notification n = new Notification("otp-7", "sms", "+15550001");
    CountDownLatch sending = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    ExecutorService pool = Executors.newSingleThreadExecutor();
    try {
      // The first sender hangs inside the gateway call past its lease, as a paused or dying process would.
      Future<SendResult> first = pool.submit(() -> codes.send(n, out -> {
        record(out);
        sending.countDown();
        release.await(30, TimeUnit.SECONDS);
      }));
      assertThat(sending.await(30, TimeUnit.SECONDS)).isTrue();
      SendResult whileAlive = codes.send(n, NotificationsTest::record);
      assertThat(whileAlive).isInstanceOf(SendResult.InFlight.class);
      assertThat(((SendResult.InFlight) whileAlive).retryAfter()).isPositive().isLessThanOrEqualTo(Duration.ofSeconds(2));
      assertThat(sends("otp-7")).isEqualTo(1);
      // The lease ends by the database clock: the redelivery takes the claim over and sends again.
      Poll.until("the first sender's lease over on the database clock", () -> db.count("SELECT count(*) FROM idem_keys"
          + " WHERE idem_keys.key = 'otp-7' AND state = 'I' AND lease_expires_at < " + now()) == 1);
      SendResult afterDeath = codes.send(n, NotificationsTest::record);
      assertThat(afterDeath).isEqualTo(new SendResultValue.SentValue(Notifications.collapseId("otp-7"), true));
      assertThat(sends("otp-7")).isEqualTo(2);
      assertThat(db.count("SELECT count(*) FROM sends WHERE notification_id = 'otp-7' AND takeover")).isEqualTo(1);
      assertThat(db.count("SELECT fence FROM idem_keys WHERE idem_keys.key = 'otp-7'")).isEqualTo(2);
      release.countDown();
      first.get(30, TimeUnit.SECONDS); // its late record is fenced off; the message went out either way
      assertThat(codes.send(n, NotificationsTest::record)).isInstanceOf(SendResult.Duplicate.class);
      assertThat(sends("otp-7")).isEqualTo(2);
    } finally {
      release.countDown();
      pool.shutdownNow();
    }
  }

  @Test
  void aFailedSendIsRetriedAtOnceWhenItMayRepeatAndLostWhenItMayLose() throws Exception {
    Notifications receipts = receipts(Delivery.AT_LEAST_ONCE_MAY_REPEAT);
    Notification n = new Notification("fail-repeat", "email", "order-2");
    assertThatThrownBy(() -> receipts.send(n, out -> {
      throw new java.io.IOException("SMTP timeout");
    })).hasMessage("SMTP timeout");
    assertThat(receipts.send(n, NotificationsTest::record)).isEqualTo(
        new SendResultValue.SentValue(Notifications.collapseId("fail-repeat"), true));
    assertThat(sends("fail-repeat")).isEqualTo(1);

    Notifications digest = idem.notifications("weekly-digest").delivery(Delivery.AT_MOST_ONCE_MAY_LOSE).build();
    Notification d = new Notification("digest-w40", "email", "u9");
    assertThatThrownBy(() -> digest.send(d, out -> {
      throw new java.io.IOException("SMTP timeout");
    })).hasMessage("SMTP timeout");
    // Claimed before the send: the redelivery does not send. The digest is lost, never doubled.
    assertThat(digest.send(d, NotificationsTest::record)).isInstanceOf(SendResult.Duplicate.class);
    assertThat(sends("digest-w40")).isZero();
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'digest-w40' AND state = 'C'")).isEqualTo(1);
  }

  @Test
  void theCapHoldsUnderRacingSenders() throws Exception {
    Cap cap = new Cap("transactional-email", 3, Duration.ofHours(1));
    Notifications receipts = idem.notifications("receipt-email").delivery(Delivery.AT_LEAST_ONCE_MAY_REPEAT).cap(cap).build();
    Notifications shipped = idem.notifications("shipped-email").delivery(Delivery.AT_MOST_ONCE_MAY_LOSE).cap(cap).build();
    // Sixteen different emails about one order, from two message types sharing the cap, all at once.
    List<SendResult> results = Race.together(16, i -> (i % 2 == 0 ? receipts : shipped)
        .send(new Notification("capped-" + i, "email", "order-77"), NotificationsTest::record));
    assertThat(results.stream().filter(r -> r instanceof SendResult.Sent)).hasSize(3);
    assertThat(results.stream().filter(r -> r instanceof SendResult.Capped)).hasSize(13)
        .allSatisfy(r -> assertThat(r).isEqualTo(new SendResultValue.CappedValue("order-77", cap)));
    assertThat(db.count("SELECT count(*) FROM sends WHERE recipient = 'order-77'")).isEqualTo(3);
    assertThat(db.count("SELECT " + (mariadb() ? "json_length" : "cardinality") + "(sent_at) FROM idem_notification_caps"
        + " WHERE cap = 'transactional-email' AND recipient = 'order-77'")).isEqualTo(3);
    // A refused notification stays refused: its redelivery is answered Capped, not sent later.
    int refused = results.indexOf(results.stream().filter(r -> !(r instanceof SendResult.Sent)).findFirst().orElseThrow());
    SendResult again = (refused % 2 == 0 ? receipts : shipped)
        .send(new Notification("capped-" + refused, "email", "order-77"), NotificationsTest::record);
    assertThat(again).isInstanceOf(SendResult.Capped.class);
    // Another order has its own count.
    assertThat(receipts.send(new Notification("capped-other", "email", "order-78"), NotificationsTest::record)).isInstanceOf(SendResult.Sent.class);
    assertThat(db.count("SELECT count(*) FROM sends WHERE recipient = 'order-77'")).isEqualTo(3);
  }

  /**
   * Senders of different notifications to one recipient, racing on a pool at each isolation level:
   * the cap lets exactly its limit through, and the recipient's row keeps exactly those sends'
   * times, oldest first, all within the window by the database clock.
   */
  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_READ_UNCOMMITTED", "TRANSACTION_READ_COMMITTED", "TRANSACTION_REPEATABLE_READ",
      "TRANSACTION_SERIALIZABLE"})
  void theCapHoldsUnderRacingSendersAtEveryIsolationLevel(String isolation) throws Exception {
    String level = isolation.substring("TRANSACTION_".length()).toLowerCase(java.util.Locale.ROOT);
    Cap cap = new Cap("cap-" + level, 3, Duration.ofHours(1));
    Notifications receipts = Idem.builder(Racers.pool(db, 8, isolation)).build().notifications("receipt-email")
        .delivery(Delivery.AT_LEAST_ONCE_MAY_REPEAT).cap(cap).build();
    String recipient = "order-" + level;
    for (int round = 0; round < 2; round++) {
      int r = round;
      List<SendResult> results = Race.together(8, i -> receipts.send(
          new Notification(level + "-" + r + "-" + i, "email", recipient), NotificationsTest::record));
      assertThat(results.stream().filter(x -> x instanceof SendResult.Sent)).as("round " + round).hasSize(round == 0 ? 3 : 0);
      assertThat(results.stream().filter(x -> x instanceof SendResult.Capped)).hasSize(round == 0 ? 5 : 8);
    }
    assertThat(db.count("SELECT count(*) FROM sends WHERE recipient = ?", recipient)).isEqualTo(3);
    // The times kept: three, in the last hour by the database clock, oldest first.
    String times = mariadb()
        ? "SELECT count(*) FROM idem_notification_caps c, JSON_TABLE(c.sent_at, '$[*]' COLUMNS (n FOR ORDINALITY,"
            + " t BIGINT PATH '$')) j WHERE c.cap = ? AND c.recipient = ? AND j.t <= " + MICROS_NOW
            + " AND j.t > " + MICROS_NOW + " - 3600000000 AND (j.n = 1 OR j.t >= JSON_VALUE(c.sent_at, CONCAT('$[', j.n - 2, ']')))"
        : "SELECT count(*) FROM idem_notification_caps c, unnest(c.sent_at) WITH ORDINALITY AS j(t, n) WHERE c.cap = ?"
            + " AND c.recipient = ? AND j.t <= clock_timestamp() AND j.t > clock_timestamp() - interval '1 hour'"
            + " AND (j.n = 1 OR j.t >= c.sent_at[j.n - 1])";
    assertThat(db.count(times, cap.name(), recipient)).isEqualTo(3);
  }

  /** MariaDB: now by the database clock in microseconds since the epoch, as its caps keep times. */
  static final String MICROS_NOW = "timestampdiff(microsecond, '1970-01-01', utc_timestamp(6))";

  @Test
  void theCapWindowSlidesOnTheDatabaseClock() throws Exception {
    Notifications nudges = idem.notifications("nudge").delivery(Delivery.AT_MOST_ONCE_MAY_LOSE)
        .cap(new Cap("nudges", 1, Duration.ofSeconds(1))).build();
    assertThat(nudges.send(new Notification("nudge-1", "push", "u5"), NotificationsTest::record)).isInstanceOf(SendResult.Sent.class);
    assertThat(nudges.send(new Notification("nudge-2", "push", "u5"), NotificationsTest::record))
        .isInstanceOf(SendResult.Capped.class);
    sleepOnTheDatabase(1.1);
    assertThat(nudges.send(new Notification("nudge-3", "push", "u5"), NotificationsTest::record)).isInstanceOf(SendResult.Sent.class);
    assertThat(db.count("SELECT count(*) FROM sends WHERE recipient = 'u5'")).isEqualTo(2);
  }

  @Test
  void anIdReusedForAnotherRecipientIsRefused() throws Exception {
    Notifications receipts = receipts(Delivery.AT_LEAST_ONCE_MAY_REPEAT);
    receipts.send(new Notification("reused", "email", "order-3"), NotificationsTest::record);
    assertThatThrownBy(() -> receipts.send(new Notification("reused", "email", "order-4"), NotificationsTest::record))
        .isInstanceOf(KeyReuseException.class);
    assertThat(sends("reused")).isEqualTo(1);
  }

  /**
   * Senders on a pool whose transactions run at SERIALIZABLE race one notification. A claim that
   * waited on another sender's claim (or a write that waited on another's write) fails with 40001
   * once that commits; it must be answered as under READ COMMITTED (in flight, or a duplicate),
   * never thrown, and exactly one sender sends.
   */
  @ParameterizedTest
  @EnumSource(Delivery.class)
  void racingSendersOnASerializablePoolSendOnceAndThrowNothing(Delivery delivery) throws Exception {
    try (HikariDataSource serializable = db.dataSource(12, "TRANSACTION_SERIALIZABLE")) {
      Notifications receipts = Idem.builder(serializable).build().notifications("receipt-email").delivery(delivery).build();
      for (int round = 0; round < 5; round++) {
        String id = "serializable-" + delivery + "-" + round;
        Notification n = new Notification(id, "email", "order-9");
        // Race.together throws if any copy threw (a 40001 that escaped)
        List<SendResult> results = Race.together(12, i -> receipts.send(n, NotificationsTest::record));
        assertThat(results.stream().filter(r -> r instanceof SendResult.Sent)).as(id).hasSize(1);
        assertThat(results).allSatisfy(r -> assertThat(r).isInstanceOfAny(SendResult.Sent.class,
            SendResult.Duplicate.class, SendResult.InFlight.class));
        assertThat(sends(id)).as(id).isEqualTo(1);
        assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'notify/email' AND idem_keys.key = ?"
            + " AND state = 'C' AND fence = 1", id)).as(id).isEqualTo(1);
      }
    }
  }

  /**
   * A notification id left in flight by one intent (its send threw, so its lease ended), then,
   * past the window, sent as another intent (another recipient): the claim is taken again as a new
   * life of the key, not a takeover of the other intent's attempt, which was never this one's to
   * repeat. The same intent's redelivery past the window is a takeover.
   */
  @Test
  void aClaimTakenAgainPastTheWindowFromAnotherIntentIsNoTakeover() throws Exception {
    RecordingListener events = new RecordingListener();
    Notifications shortLived = Idem.builder(ds).listener(events).build().notifications("receipt-email")
        .delivery(Delivery.AT_LEAST_ONCE_MAY_REPEAT).lease(Duration.ofMillis(500))
        .window(new DedupeWindow(Duration.ofSeconds(1))).build();
    for (String id : List.of("new-life", "same-life")) {
      assertThatThrownBy(() -> shortLived.send(new Notification(id, "email", "order-5"), out -> {
        throw new java.io.IOException("SMTP timeout");
      })).hasMessage("SMTP timeout");
    }
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'notify/email' AND idem_keys.key IN ('new-life', 'same-life')"
        + " AND state = 'I' AND fence = 1 AND lease_expires_at <= " + now())).isEqualTo(2);
    Poll.until("both past their 1 s window, by the database clock", () -> db.count("SELECT count(*) FROM idem_keys"
        + " WHERE scope = 'notify/email' AND idem_keys.key IN ('new-life', 'same-life') AND expires_at < " + now()) == 2);

    SendResult other = shortLived.send(new Notification("new-life", "email", "order-6"), NotificationsTest::record);
    assertThat(other).isEqualTo(new SendResultValue.SentValue(Notifications.collapseId("new-life"), false));
    assertThat(db.count("SELECT count(*) FROM sends WHERE notification_id = 'new-life' AND recipient = 'order-6'"
        + " AND NOT takeover")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'notify/email' AND idem_keys.key = 'new-life'"
        + " AND state = 'C' AND fence = 2")).isEqualTo(1);
    assertThat(events.of(IdemEvent.LeaseTakenOver.class, IdempotencyKey.of("notify/email", "new-life"))).isEmpty();

    SendResult same = shortLived.send(new Notification("same-life", "email", "order-5"), NotificationsTest::record);
    assertThat(same).isEqualTo(new SendResultValue.SentValue(Notifications.collapseId("same-life"), true));
    assertThat(db.count("SELECT count(*) FROM sends WHERE notification_id = 'same-life' AND takeover")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE scope = 'notify/email' AND idem_keys.key = 'same-life'"
        + " AND state = 'C' AND fence = 2")).isEqualTo(1);
    assertThat(events.of(IdemEvent.LeaseTakenOver.class, IdempotencyKey.of("notify/email", "same-life"))).hasSize(1);
  }

  /**
   * The message went out and the server then ended the sender's idle pool connection
   * (pg_terminate_backend, as an administrator or a shutting-down server does; MariaDB's KILL
   * CONNECTION): the record of "sent" fails on it (57P01; MariaDB 1927), and is made again on a
   * fresh connection, fenced by the same token, so the key is completed, not left in flight for the
   * whole two-minute lease.
   */
  @Test
  void aRecordOnAConnectionTheServerEndedIsMadeAgainOnAFreshOne() throws Exception {
    try (HikariDataSource victim = db.dataSourceWithDriverParams(1, mariadb() ? "" : "ApplicationName=notify-victim")) {
      Notifications codes = Idem.builder(victim).build().notifications("login-code")
          .delivery(Delivery.AT_LEAST_ONCE_MAY_REPEAT).build();
      Notification n = new Notification("otp-terminated", "sms", "+15550003");
      long victimId;
      try (var c = victim.getConnection(); var st = c.createStatement();
          var rs = st.executeQuery(mariadb() ? "SELECT CONNECTION_ID()" : "SELECT pg_backend_pid()")) {
        rs.next();
        victimId = rs.getLong(1); // the pool's one connection, which the record will get again
      }
      String sessions = mariadb() ? "SELECT count(*) FROM information_schema.processlist WHERE id = " + victimId
          : "SELECT count(*) FROM pg_stat_activity WHERE pid = " + victimId;
      assertThat(sends("otp-terminated")).isZero(); // warms the pools the sender uses: it must be quick
      // The pool hands its one connection out again unchecked when it was used within 500 ms: the
      // record gets the terminated one.
      SendResult first = codes.send(n, out -> {
        record(out);
        db.execute(mariadb() ? "KILL CONNECTION " + victimId : "SELECT pg_terminate_backend(" + victimId + ")");
        Poll.until("the victim's session ended", () -> db.count(sessions) == 0);
      });
      assertThat(first).isEqualTo(new SendResultValue.SentValue(Notifications.collapseId("otp-terminated"), false));
      assertThat(sends("otp-terminated")).isEqualTo(1);
      assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'otp-terminated' AND state = 'C'"
          + " AND fence = 1")).as("recorded under the attempt's own token").isEqualTo(1);
      assertThat(codes.send(n, NotificationsTest::record)).isInstanceOf(SendResult.Duplicate.class);
      assertThat(sends("otp-terminated")).isEqualTo(1);
    }
  }

  /**
   * The message went out and its record then fails for good (here a constraint the table gained
   * meanwhile refuses the completed row: no retry can succeed). The lease must be ended before the
   * failure is thrown, so the redelivery sends at once (at least once) instead of being told "in
   * flight" for the whole two-minute lease.
   */
  @Test
  void aRecordThatFailsForGoodEndsTheLeaseSoTheRedeliverySendsAtOnce() throws Exception {
    Notifications codes = idem.notifications("login-code").delivery(Delivery.AT_LEAST_ONCE_MAY_REPEAT).build();
    Notification n = new Notification("otp-refused", "sms", "+15550004");
    try {
      assertThatThrownBy(() -> codes.send(n, out -> {
        record(out);
        // (MariaDB checks the rows already there, which pass, and has no NOT VALID)
        db.execute("ALTER TABLE idem_keys ADD CONSTRAINT no_completion_of_otp_refused"
            + " CHECK (idem_keys.key <> 'otp-refused' OR state <> 'C')" + (mariadb() ? "" : " NOT VALID"));
      })).isInstanceOf(DataAccessException.class).hasMessageContaining("no_completion_of_otp_refused");
    } finally {
      db.execute("ALTER TABLE idem_keys DROP CONSTRAINT IF EXISTS no_completion_of_otp_refused");
    }
    assertThat(sends("otp-refused")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'otp-refused' AND state = 'I'"
        + " AND fence = 1 AND lease_expires_at <= " + now())).as("the lease was ended").isEqualTo(1);

    SendResult redelivered = codes.send(n, NotificationsTest::record);
    assertThat(redelivered).isEqualTo(new SendResultValue.SentValue(Notifications.collapseId("otp-refused"), true));
    assertThat(sends("otp-refused")).isEqualTo(2);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = 'otp-refused' AND state = 'C'"
        + " AND fence = 2")).isEqualTo(1);
  }

  @Test
  void badSettingsAreRefusedClearly() {
    assertThatThrownBy(() -> idem.notifications("receipt").build())
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("delivery");
    assertThatThrownBy(() -> idem.notifications("bad type").delivery(Delivery.AT_MOST_ONCE_MAY_LOSE).build())
        .hasMessageContaining("message type contains a space");
    assertThatThrownBy(() -> new Cap("c", 0, Duration.ofHours(1))).hasMessageContaining("limit");
    assertThatThrownBy(() -> new Cap("c", 3, Duration.ZERO)).hasMessageContaining("per");
    assertThatThrownBy(() -> new Notification("id", "e mail", "r")).hasMessageContaining("channel contains a space");
    assertThatThrownBy(() -> idem.notifications("r").delivery(Delivery.AT_MOST_ONCE_MAY_LOSE).lease(Duration.ZERO).build())
        .hasMessageContaining("lease");
  }

  /** The lease of the sender process the crash test kills. */
  static final long CHILD_LEASE_MILLIS = 1500;

  /**
   * A sender process killed (SIGKILL) after its message went out and before its record: while it
   * lives its claim stops the redelivery; once its lease ends, the direction of failure decides.
   */
  @ParameterizedTest
  @EnumSource(Delivery.class)
  void aKilledSenderIsRepeatedOrLostAsItsTypeChose(Delivery delivery) throws Exception {
    String id = "otp-crash-" + delivery;
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process child = new ProcessBuilder(java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", System.getProperty("java.class.path"),
        NotifyChild.class.getName(), db.jdbcUrl(), delivery.name(), id, Long.toString(CHILD_LEASE_MILLIS))
        .redirectError(ProcessBuilder.Redirect.INHERIT)
        .start();
    Notifications codes = idem.notifications("login-code").delivery(delivery).lease(Duration.ofMillis(CHILD_LEASE_MILLIS)).build();
    Notification n = new Notification(id, "sms", "+15550002");
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
    sleepOnTheDatabase((CHILD_LEASE_MILLIS + 200) / 1000.0); // the lease ends by the database clock

    SendResult redelivered = codes.send(n, Sends.into(ds));
    if (delivery == Delivery.AT_LEAST_ONCE_MAY_REPEAT) {
      // Sent, then died before "sent" was recorded: the redelivery takes over and sends again.
      assertThat(redelivered).isEqualTo(new SendResultValue.SentValue(Notifications.collapseId(id), true));
      assertThat(sends(id)).isEqualTo(2);
      assertThat(db.count("SELECT fence FROM idem_keys WHERE idem_keys.key = ?", id)).isEqualTo(2);
    } else {
      // "Sending" was recorded before the send: nothing sends it again.
      assertThat(redelivered).isInstanceOf(SendResult.Duplicate.class);
      assertThat(sends(id)).isEqualTo(1);
    }
    assertThat(db.count("SELECT count(DISTINCT collapse_id) FROM sends WHERE notification_id = ?", id)).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_keys WHERE idem_keys.key = ? AND state = 'C'", id)).isEqualTo(1);
  }
}
