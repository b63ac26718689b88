package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.LockWaits;
import dev.idem.jdbc.VendorSql;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.tx.Tx;
import dev.idem.jdbc.tx.TxConsumer;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.KeyReuseException;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import dev.idem.transition.Outcome;
import dev.idem.window.DedupeWindow;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A guard whose calls lately were mostly repeats reads a key's row before it claims, in
 * auto-commit. Read back from the database and from the connections the guard took: such a guard
 * answers a repeat it never saw with one read and no transaction; a read that does not find a
 * completed row within its window leaves the call to the claim, so a copy racing a first copy still
 * commits one effect per key, a key past its window runs again, and another request under the key
 * is refused as on the claim's path.
 */
@IdemTest(poolSize = 8, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class ReadFirstTest {
  static ExecutorFixture f;
  static final ExecutorService pool = Executors.newCachedThreadPool();
  /** Connections the readers took, and how many of them a transaction was opened on. */
  static final AtomicLong taken = new AtomicLong();
  static final AtomicLong transactions = new AtomicLong();
  /**
   * Round trips the readers made: statements executed, and (pgjdbc) commits and rollbacks of a
   * transaction open on the server (pgjdbc sends nothing for one that is not).
   */
  static final AtomicLong trips = new AtomicLong();
  /** The readers' Idem: another instance, on connections that are counted. */
  static Idem readers;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
    readers = Idem.builder(counting(f.ds)).build();
  }

  @AfterAll
  static void stop() {
    pool.shutdownNow();
  }

  /** What a call took: connections, and transactions opened on them. */
  record Taken(long connections, long transactions) {
    static Taken now() {
      return new Taken(taken.get(), ReadFirstTest.transactions.get());
    }

    Taken since(Taken before) {
      return new Taken(connections - before.connections, transactions - before.transactions);
    }

    /** One connection, in auto-commit: the read alone. */
    static final Taken READ_ALONE = new Taken(1, 0);
  }

  static String completedKey(IdempotentExecutor writer, String request) {
    writer.execute(IdempotencyKey.of("read-first", request), Fingerprint.ofFields(Map.of("r", request)), Codec.utf8(),
        tx -> "result-" + request);
    return request;
  }

  /** Makes {@code reader} a guard of mostly repeats: 20 repeats of keys another instance completed. */
  static void mostlyRepeats(IdempotentExecutor reader, IdempotentExecutor writer) throws SQLException {
    for (int i = 0; i < 20; i++) {
      String request = completedKey(writer, "warm-" + UUID.randomUUID());
      assertThat(call(reader, request, "unused").replayed()).isTrue();
    }
  }

  static Execution<String> call(IdempotentExecutor executor, String request, String payment) throws SQLException {
    return executor.execute(IdempotencyKey.of("read-first", request), Fingerprint.ofFields(Map.of("r", request)), Codec.utf8(),
        tx -> ExecutorFixture.pay(tx, payment, 1));
  }

  @Test
  void aGuardOfMostlyRepeatsAnswersARepeatItNeverSawWithOneReadAndGoesBackToClaimingFirstForNewKeys() throws Exception {
    IdempotentExecutor writer = f.idem.executor().build();
    IdempotentExecutor reader = readers.executor().build();
    String first = completedKey(writer, "cold-" + UUID.randomUUID());
    Taken before = Taken.now();
    assertThat(call(reader, first, first).value()).isEqualTo("result-" + first);
    assertThat(Taken.now().since(before).transactions()).as("a fresh guard claims first").isEqualTo(1);

    mostlyRepeats(reader, writer);
    String cold = completedKey(writer, "cold-" + UUID.randomUUID());
    before = Taken.now();
    assertThat(call(reader, cold, cold).value()).isEqualTo("result-" + cold);
    assertThat(Taken.now().since(before)).isEqualTo(Taken.READ_ALONE);
    assertThat(f.payments(cold)).isZero();

    // New keys: each first pays the read, then the guard claims first again.
    List<Taken> costs = new ArrayList<>();
    for (int i = 0; i < 30; i++) {
      String request = "new-" + UUID.randomUUID();
      before = Taken.now();
      assertThat(call(reader, request, request).applied()).isTrue();
      costs.add(Taken.now().since(before));
      assertThat(f.payments(request)).isEqualTo(1);
    }
    assertThat(costs.get(0)).isEqualTo(new Taken(2, 1));
    assertThat(costs.subList(20, 30)).allMatch(c -> c.equals(new Taken(1, 1)));
  }

  /**
   * A repeat among new keys, which the guard claims first: the claim inserts nothing, and the read
   * of the row ends the empty transaction in the same round trip. Two round trips on PostgreSQL,
   * the key's row as it was, no effect.
   */
  @Test
  void aRepeatAmongNewKeysIsAnsweredInTwoRoundTripsWritingNothing() throws Exception {
    IdempotentExecutor writer = f.idem.executor().build();
    IdempotentExecutor reader = readers.executor().build();
    for (int i = 0; i < 5; i++) {
      String request = "new-" + UUID.randomUUID();
      assertThat(call(reader, request, request).applied()).isTrue();
    }
    String cold = completedKey(writer, "sparse-" + UUID.randomUUID());
    IdempotencyKey key = IdempotencyKey.of("read-first", cold);
    String row = f.keyRow(key);
    long before = trips.get();
    Taken taken = Taken.now();
    assertThat(call(reader, cold, cold).value()).isEqualTo("result-" + cold);
    assertThat(Taken.now().since(taken)).as("claimed first, in a transaction").isEqualTo(new Taken(1, 1));
    if (!f.maria()) {
      assertThat(trips.get() - before).as("the claim, then the read with the rollback").isEqualTo(2);
    }
    assertThat(f.payments(cold)).isZero();
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.keyRow(key)).isEqualTo(row);
    // the guard goes on: a new key after it is applied, once
    String next = "new-" + UUID.randomUUID();
    assertThat(call(reader, next, next).applied()).isTrue();
    assertThat(f.payments(next)).isEqualTo(1);
  }

  @Test
  void theInboxOfMostlyRepeatsAnswersARepeatItNeverSawWithOneRead() throws Exception {
    Inbox writer = f.idem.inbox("read-first").build();
    Inbox reader = readers.inbox("read-first").build();
    for (int i = 0; i < 21; i++) {
      String id = "m-" + UUID.randomUUID();
      writer.receive(id, tx -> ExecutorFixture.pay(tx, id, 1));
      Taken before = Taken.now();
      assertThat(reader.receive(id, tx -> ExecutorFixture.pay(tx, id, 1)).replayed()).isTrue();
      if (i == 20) {
        assertThat(Taken.now().since(before)).isEqualTo(Taken.READ_ALONE);
      }
      assertThat(f.payments(id)).isEqualTo(1);
    }
  }

  /**
   * Sequences are on the same engine: a stream whose events lately were mostly repeats answers a
   * repeat (a number at or below the entity's) with one read and no transaction, and a newer number
   * still applies, once. Unlike a key, an entity handled lately is not read first by itself: its
   * next event usually carries a new number.
   */
  @Test
  void sequencesOfMostlyRepeatsAnswerARepeatWithOneRead() throws Exception {
    f.sql("CREATE TABLE IF NOT EXISTS read_first_prices (entity text NOT NULL, seq bigint NOT NULL)");
    var writer = f.idem.sequences("read-first");
    var reader = readers.sequences("read-first");
    String entity = "sku-" + UUID.randomUUID();
    TxConsumer<SQLException> none = tx -> {
      throw new IllegalStateException("a repeat must not run the effect");
    };
    assertThat(writer.applyIfNewer(entity, 5, tx -> price(tx, entity, 5))).isEqualTo(Outcome.APPLIED);
    Taken before = Taken.now();
    assertThat(reader.applyIfNewer(entity, 5, none)).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(Taken.now().since(before)).as("a fresh stream claims first").isEqualTo(new Taken(1, 1));
    for (int i = 0; i < 20; i++) {
      assertThat(reader.applyIfNewer(entity, 1 + i % 5, none)).isEqualTo(Outcome.ALREADY_DONE);
    }
    before = Taken.now();
    assertThat(reader.applyIfNewer(entity, 4, none)).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(Taken.now().since(before)).isEqualTo(Taken.READ_ALONE);
    before = Taken.now();
    assertThat(reader.applyIfNewer(entity, 6, tx -> price(tx, entity, 6))).isEqualTo(Outcome.APPLIED);
    assertThat(Taken.now().since(before)).as("the read finds 6 newer; the claim's transaction applies it").isEqualTo(new Taken(2, 1));
    assertThat(f.count("SELECT count(*) FROM read_first_prices WHERE entity = ? AND seq IN (5, 6)", entity)).isEqualTo(2);
    assertThat(f.count("SELECT count(*) FROM read_first_prices WHERE entity = ?", entity))
        .as("one effect per applied number: 5, 6").isEqualTo(2);
    assertThat(f.count("SELECT last_applied FROM idem_sequences WHERE stream = 'read-first' AND entity = ?", entity))
        .isEqualTo(6);
  }

  static void price(Tx tx, String entity, long seq) throws SQLException {
    try (var ps = tx.connection().prepareStatement("INSERT INTO read_first_prices VALUES (?, ?)")) {
      ps.setString(1, entity);
      ps.setLong(2, seq);
      ps.executeUpdate();
    }
  }

  /**
   * On the read's path too the window is judged at the copy's arrival by the database clock: within
   * a 1 s window a repeat is the replay; past it, the read leaves it to the claim, which claims the
   * key again and runs the effect.
   */
  @Test
  void theWindowIsJudgedAtArrivalOnTheReadsPath() throws Exception {
    IdempotentExecutor writer = f.idem.executor().window(DedupeWindow.of(Duration.ofSeconds(1))).build();
    IdempotentExecutor reader = readers.executor().window(DedupeWindow.of(Duration.ofSeconds(1))).build();
    mostlyRepeats(reader, f.idem.executor().build());
    String request = "window-" + UUID.randomUUID();
    assertThat(call(writer, request, request).applied()).isTrue();
    Taken before = Taken.now();
    assertThat(call(reader, request, request).replayed()).isTrue();
    assertThat(Taken.now().since(before)).isEqualTo(Taken.READ_ALONE);
    f.awaitPastWindow(IdempotencyKey.of("read-first", request));
    before = Taken.now();
    assertThat(call(reader, request, request).applied()).isTrue();
    assertThat(Taken.now().since(before)).as("read, then the claim's transaction").isEqualTo(new Taken(2, 1));
    assertThat(f.payments(request)).isEqualTo(2);
  }

  /**
   * A repeat of a key this guard applied or read lately is answered from memory: the stored result,
   * no connection taken; another request under the key is refused the same way; nothing is written.
   * The inbox likewise. A key applied in the caller's transaction is not remembered (that
   * transaction may roll back), and a remembered row is not answered past its window.
   */
  @Test
  void aRepeatOfAKeyThisGuardAppliedOrReadLatelyTakesNoConnection() throws Exception {
    IdempotentExecutor writer = f.idem.executor().build();
    IdempotentExecutor reader = readers.executor().build();
    String request = "memory-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("read-first", request);
    String paid = call(reader, request, request).value();
    String row = f.keyRow(key);
    for (int i = 0; i < 3; i++) {
      Taken before = Taken.now();
      Execution<String> repeat = call(reader, request, "unused");
      assertThat(repeat).isInstanceOf(Execution.Replayed.class);
      assertThat(repeat.value()).isEqualTo(paid);
      assertThat(Taken.now().since(before)).isEqualTo(new Taken(0, 0));
    }
    Taken before = Taken.now();
    assertThatThrownBy(() -> reader.execute(key, Fingerprint.ofFields(Map.of("r", "another")), Codec.utf8(),
        tx -> ExecutorFixture.pay(tx, request, 1)))
        .isInstanceOf(KeyReuseException.class);
    assertThat(Taken.now().since(before)).isEqualTo(new Taken(0, 0));
    assertThat(f.keyRow(key)).isEqualTo(row);
    assertThat(f.payments(request)).isEqualTo(1);
    assertThat(f.payments("unused")).isZero();

    // A key another instance applied: the first repeat here goes to the database, the next ones not.
    String elsewhere = completedKey(writer, "memory-" + UUID.randomUUID());
    assertThat(call(reader, elsewhere, elsewhere).value()).isEqualTo("result-" + elsewhere);
    before = Taken.now();
    assertThat(call(reader, elsewhere, elsewhere).value()).isEqualTo("result-" + elsewhere);
    assertThat(Taken.now().since(before)).isEqualTo(new Taken(0, 0));
    assertThat(f.payments(elsewhere)).isZero();

    Inbox inbox = readers.inbox("memory").build();
    String id = "m-" + UUID.randomUUID();
    assertThat(inbox.receive(id, tx -> ExecutorFixture.pay(tx, id, 1)).applied()).isTrue();
    before = Taken.now();
    assertThat(inbox.receive(id, tx -> ExecutorFixture.pay(tx, id, 1)).replayed()).isTrue();
    assertThat(Taken.now().since(before)).isEqualTo(new Taken(0, 0));
    assertThat(f.payments(id)).isEqualTo(1);
  }

  /** Each answer from memory is the caller's own copy of the stored result: one caller changing it changes no other's. */
  @Test
  void anAnswerFromMemoryIsTheCallersOwnCopy() throws Exception {
    IdempotentExecutor reader = readers.executor().build();
    IdempotencyKey key = IdempotencyKey.of("read-first", "bytes-" + UUID.randomUUID());
    byte[] stored = {1, 2, 3};
    assertThat(reader.execute(key, Fingerprint.EMPTY, Codec.bytes(), tx -> stored.clone()).applied()).isTrue();
    byte[] first = reader.execute(key, Fingerprint.EMPTY, Codec.bytes(), tx -> new byte[] {9}).value();
    Arrays.fill(first, (byte) 0);
    Taken before = Taken.now();
    assertThat(reader.execute(key, Fingerprint.EMPTY, Codec.bytes(), tx -> new byte[] {9}).value()).containsExactly(stored);
    assertThat(Taken.now().since(before)).isEqualTo(new Taken(0, 0));
    assertThat(f.count("SELECT count(*) FROM idem_keys k WHERE k.scope = ? AND k.key = ? AND "
        + VendorSql.hex(f.db, "k.result") + " = '010203'",
        key.scope(), key.value())).isEqualTo(1);
  }

  /**
   * A repeat answered from memory is as old as the database says: a copy that waited for the first
   * copy's slow effect and got its replay from the claim is answered later from memory with the same
   * completion and an age grown only by the time between the two calls (not by the wait again).
   */
  @Test
  void anAnswerFromMemoryIsAsOldAsTheDatabaseSays() throws Exception {
    IdempotentExecutor first = f.idem.executor().inFlightWait(Duration.ofSeconds(10)).build();
    IdempotentExecutor copy = readers.executor().inFlightWait(Duration.ofSeconds(10)).build();
    String request = "age-" + UUID.randomUUID();
    IdempotencyKey key = IdempotencyKey.of("read-first", request);
    CountDownLatch claimed = new CountDownLatch(1);
    Future<Execution<String>> running = pool.submit(() -> first.execute(key, Fingerprint.EMPTY, Codec.utf8(), tx -> {
      claimed.countDown();
      // slow: runs on until the copy waits on the key and 800 ms have passed on the database clock
      tx.dsl().execute(LockWaits.hold(f.db, 1, Duration.ofMillis(800)));
      return ExecutorFixture.pay(tx, request, 1);
    }));
    assertThat(claimed.await(10, TimeUnit.SECONDS)).isTrue();
    Execution.Replayed<String> waited = (Execution.Replayed<String>) copy.execute(key, Fingerprint.EMPTY, Codec.utf8(),
        tx -> ExecutorFixture.pay(tx, request, 1));
    assertThat(running.get(10, TimeUnit.SECONDS).applied()).isTrue();
    long between = System.nanoTime();
    Taken before = Taken.now();
    Execution.Replayed<String> remembered = (Execution.Replayed<String>) copy.execute(key, Fingerprint.EMPTY, Codec.utf8(),
        tx -> ExecutorFixture.pay(tx, request, 1));
    Duration elapsed = Duration.ofNanos(System.nanoTime() - between);
    assertThat(Taken.now().since(before)).isEqualTo(new Taken(0, 0));
    assertThat(remembered.firstCompletedAt()).isEqualTo(waited.firstCompletedAt());
    assertThat(waited.age()).isGreaterThanOrEqualTo(Duration.ofMillis(700));
    assertThat(remembered.age().minus(waited.age())).isBetween(Duration.ZERO, elapsed.plusMillis(100));
    assertThat(f.payments(request)).isEqualTo(1);
  }

  /** With the memory off, every repeat of a key the guard applied is one read, and the replay. */
  @Test
  void answersFromMemoryZeroReadsEveryRepeat() throws Exception {
    IdempotentExecutor reader = Idem.builder(counting(f.ds)).answersFromMemory(Duration.ZERO).build().executor().build();
    String request = "no-memory-" + UUID.randomUUID();
    String paid = call(reader, request, request).value();
    for (int i = 0; i < 3; i++) {
      Taken before = Taken.now();
      assertThat(call(reader, request, "unused").value()).isEqualTo(paid);
      assertThat(Taken.now().since(before)).isEqualTo(Taken.READ_ALONE);
    }
    assertThat(f.payments(request)).isEqualTo(1);
    assertThat(f.payments("unused")).isZero();
  }

  @Test
  void aKeyAppliedInTheCallersTransactionIsNotAnsweredFromMemory() throws Exception {
    IdempotentExecutor reader = readers.executor().build();
    String request = "rolled-back-" + UUID.randomUUID();
    assertThatThrownBy(() -> readers.useTransaction(tx -> {
      assertThat(call(reader, request, request).applied()).isTrue();
      throw new IllegalStateException("the caller's transaction rolls back");
    })).hasMessageContaining("rolls back");
    assertThat(f.keyRows(IdempotencyKey.of("read-first", request))).isZero();
    assertThat(call(reader, request, request).applied()).as("runs: its first run was rolled back").isTrue();
    assertThat(f.payments(request)).isEqualTo(1);
  }

  @Test
  void aRememberedRowIsNotAnsweredPastItsWindow() throws Exception {
    IdempotentExecutor reader = readers.executor().window(DedupeWindow.of(Duration.ofSeconds(1))).build();
    String request = "memory-window-" + UUID.randomUUID();
    assertThat(call(reader, request, request).applied()).isTrue();
    Taken before = Taken.now();
    assertThat(call(reader, request, request).replayed()).isTrue();
    assertThat(Taken.now().since(before)).isEqualTo(new Taken(0, 0));
    f.awaitPastWindow(IdempotencyKey.of("read-first", request));
    assertThat(call(reader, request, request).applied()).as("past the window: claimed again").isTrue();
    assertThat(f.payments(request)).isEqualTo(2);
    assertThat(f.keyRows(IdempotencyKey.of("read-first", request))).isEqualTo(1);
  }

  /** Another request under a completed key is refused on the read's path as on the claim's: nothing runs or changes. */
  @Test
  void anotherRequestUnderTheKeyIsRefusedOnTheReadsPath() throws Exception {
    IdempotentExecutor writer = f.idem.executor().build();
    IdempotentExecutor reader = readers.executor().build();
    mostlyRepeats(reader, writer);
    String request = completedKey(writer, "reuse-" + UUID.randomUUID());
    IdempotencyKey key = IdempotencyKey.of("read-first", request);
    String row = f.keyRow(key);
    Taken before = Taken.now();
    assertThatThrownBy(() -> reader.execute(key, Fingerprint.ofFields(Map.of("r", "another")), Codec.utf8(),
        tx -> ExecutorFixture.pay(tx, request, 1)))
        .isInstanceOf(KeyReuseException.class);
    assertThat(Taken.now().since(before)).isEqualTo(Taken.READ_ALONE);
    assertThat(f.keyRow(key)).isEqualTo(row);
    assertThat(f.payments(request)).isZero();
  }

  /**
   * A copy that reads first, racing a first copy of the same key on another thread and instance
   * (each key at once, 30 keys, the first copy's effect slow enough to be caught running): one
   * effect per key, and every answer the first copy's outcome or the copy's own.
   */
  @Test
  void aCopyThatReadsFirstRacingAFirstCopyCommitsOneEffectPerKey() throws Exception {
    IdempotentExecutor writer = f.idem.executor().inFlightWait(Duration.ofSeconds(10)).build();
    IdempotentExecutor reader = readers.executor().inFlightWait(Duration.ofSeconds(10)).build();
    Inbox writerInbox = f.idem.inbox("race").inFlightWait(Duration.ofSeconds(10)).build();
    Inbox readerInbox = readers.inbox("race").inFlightWait(Duration.ofSeconds(10)).build();
    IdempotentExecutor warm = f.idem.executor().build();
    int keys = 30;
    List<String> requests = new ArrayList<>();
    long reads = 0;
    for (int i = 0; i < keys; i++) {
      mostlyRepeats(reader, warm); // keeps the reader reading first, whatever the races before answered
      for (int j = 0; j < 20; j++) {
        String id = "warm-" + UUID.randomUUID();
        writerInbox.receive(id, tx -> {});
        readerInbox.receive(id, tx -> {});
      }
      String request = "race-" + i + "-" + UUID.randomUUID();
      requests.add(request);
      // every other key, the first copy is caught running: its effects go on until the copy waits on them
      boolean caught = i % 2 == 1;
      CyclicBarrier together = new CyclicBarrier(2);
      Future<List<Execution<?>>> first = pool.submit(() -> {
        together.await(10, TimeUnit.SECONDS);
        return List.of(writer.execute(IdempotencyKey.of("read-first", request), Fingerprint.EMPTY, Codec.utf8(), tx -> {
          String id = ExecutorFixture.pay(tx, request, 1);
          if (caught) {
            LockWaits.await(f.db, 1);
          }
          return id;
        }), writerInbox.receive(request, tx -> {
          ExecutorFixture.pay(tx, request + "-inbox", 1);
          if (caught) {
            LockWaits.await(f.db, 1);
          }
        }));
      });
      together.await(10, TimeUnit.SECONDS);
      Taken before = Taken.now();
      Execution<String> copy = reader.execute(IdempotencyKey.of("read-first", request), Fingerprint.EMPTY, Codec.utf8(),
          tx -> ExecutorFixture.pay(tx, request, 1));
      Execution<Void> inboxCopy = readerInbox.receive(request, tx -> ExecutorFixture.pay(tx, request + "-inbox", 1));
      Taken cost = Taken.now().since(before);
      reads += cost.connections() - cost.transactions();
      List<Execution<?>> firsts = first.get(20, TimeUnit.SECONDS);
      assertThat(List.of(firsts.get(0), copy)).as("%s: one applied, one replayed", request)
          .satisfiesExactlyInAnyOrder(e -> assertThat(e.applied()).isTrue(), e -> assertThat(e.replayed()).isTrue());
      assertThat(List.of(firsts.get(1), inboxCopy)).as("%s (inbox): one applied, one replayed", request)
          .satisfiesExactlyInAnyOrder(e -> assertThat(e.applied()).isTrue(), e -> assertThat(e.replayed()).isTrue());
    }
    for (String request : requests) {
      assertThat(f.payments(request)).as(request).isEqualTo(1);
      assertThat(f.payments(request + "-inbox")).as(request + " (inbox)").isEqualTo(1);
      assertThat(f.keyRows(IdempotencyKey.of("read-first", request))).isEqualTo(1);
    }
    assertThat(reads).as("every copy read first").isEqualTo(2L * keys);
  }

  /** {@code ds}, counting the connections taken and the transactions opened on them. */
  /** {@code st}, each of its executions counted in {@link #trips}. */
  static <S extends java.sql.Statement> S counted(Class<S> type, S st) {
    return type.cast(Proxy.newProxyInstance(ReadFirstTest.class.getClassLoader(), new Class<?>[] {type},
        (proxy, method, args) -> {
          if (method.getName().startsWith("execute")) {
            trips.incrementAndGet();
          }
          try {
            return method.invoke(st, args);
          } catch (InvocationTargetException e) {
            throw e.getCause();
          }
        }));
  }

  static DataSource counting(DataSource ds) {
    return new DataSourceWrapper() {
      @Override
      public Connection getConnection() throws SQLException {
        Connection c = ds.getConnection();
        taken.incrementAndGet();
        org.postgresql.core.BaseConnection pg = c.isWrapperFor(org.postgresql.core.BaseConnection.class)
            ? c.unwrap(org.postgresql.core.BaseConnection.class) : null;
        return (Connection) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {Connection.class},
            (proxy, method, args) -> {
              String name = method.getName();
              if (name.equals("setAutoCommit") && !(Boolean) args[0]) {
                transactions.incrementAndGet();
              }
              if ((name.equals("commit") || (name.equals("rollback") && args == null)) && pg != null
                  && pg.getTransactionState() != org.postgresql.core.TransactionState.IDLE) {
                trips.incrementAndGet();
              }
              Object result;
              try {
                result = method.invoke(c, args);
              } catch (InvocationTargetException e) {
                throw e.getCause();
              }
              if (result instanceof java.sql.PreparedStatement ps) {
                return counted(java.sql.PreparedStatement.class, ps);
              }
              if (result instanceof java.sql.Statement st) {
                return counted(java.sql.Statement.class, st);
              }
              return result;
            });
      }
    };
  }
}
