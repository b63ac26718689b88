package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.Proxies;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Phase 3 of an external effect when the database goes away after the provider answered: the
 * fenced record is tried again on fresh connections; if it fails for good, the lease is ended at
 * once, so a retry with a resolver finishes now instead of answering InFlight for the whole lease.
 */
@IdemTest(poolSize = 6, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class ExternalRecordTest {
  static ExecutorFixture f;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
  }

  /** The pool, whose next {@code failing} borrows fail as a dead server's would (SQLSTATE 08006). */
  static final class Flaky extends DataSourceWrapper {
    final DataSource real;
    final AtomicInteger failing = new AtomicInteger();

    Flaky(DataSource real) {
      this.real = real;
    }

    @Override
    public Connection getConnection() throws SQLException {
      if (failing.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
        throw new SQLException("connection refused (test)", "08006");
      }
      return real.getConnection();
    }
  }

  /**
   * The pool, whose connections run the next phase-3 record and then fail as a dead server's would
   * (08006): the record committed, and its answer was lost.
   */
  static final class LosesTheAnswer extends DataSourceWrapper {
    final DataSource real;
    final java.util.concurrent.atomic.AtomicBoolean armed = new java.util.concurrent.atomic.AtomicBoolean();

    LosesTheAnswer(DataSource real) {
      this.real = real;
    }

    @Override
    public Connection getConnection() throws SQLException {
      Connection c = real.getConnection();
      return (Connection) java.lang.reflect.Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {Connection.class},
          (proxy, method, args) -> {
            Object result = Proxies.invoke(method, c, args);
            // the record: PostgreSQL's statement names "result", MariaDB's result or `result`
            if (method.getName().equals("prepareStatement") && ((String) args[0]).startsWith("update")
                && (((String) args[0]).contains("\"result\" =") || ((String) args[0]).contains("result = ?")
                    || ((String) args[0]).contains("`result` ="))) {
              java.sql.PreparedStatement ps = (java.sql.PreparedStatement) result;
              return java.lang.reflect.Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {java.sql.PreparedStatement.class},
                  (p2, m2, a2) -> {
                    Object r2 = Proxies.invoke(m2, ps, a2);
                    if (m2.getName().startsWith("execute") && armed.compareAndSet(true, false)) {
                      throw new SQLException("connection lost after the statement ran (test)", "08006");
                    }
                    return r2;
                  });
            }
            return result;
          });
    }
  }

  /**
   * The record committed and the connection died before its answer: the retry finds the row
   * completed under this attempt's token, and the call is Applied, not told it was taken over.
   */
  @Test
  void aRecordThatCommittedButLostItsAnswerIsApplied() throws SQLException {
    LosesTheAnswer lossy = new LosesTheAnswer(f.ds);
    IdempotentExecutor executor = Idem.builder(lossy).build().executor().build();
    IdempotencyKey key = IdempotencyKey.of("record", UUID.randomUUID().toString());
    Execution<String> e = executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), attempt -> {
      lossy.armed.set(true);
      return Provider.charge(f.ds, attempt.callKey().value(), 40);
    });
    assertThat(lossy.armed).as("the record's answer was lost once").isFalse();
    assertThat(e.applied()).isTrue();
    assertThat(state(key)).isEqualTo("C");
    assertThat(f.column(key, f.resultText())).isEqualTo(e.value());
  }

  static String state(IdempotencyKey key) {
    return f.column(key, "state");
  }

  @Test
  void aRecordThatFailsOnceIsTriedAgainOnAFreshConnection() throws SQLException {
    Flaky flaky = new Flaky(f.ds);
    IdempotentExecutor executor = Idem.builder(flaky).build().executor().lease(Duration.ofSeconds(30)).build();
    IdempotencyKey key = IdempotencyKey.of("record", UUID.randomUUID().toString());
    Execution<String> e = executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), attempt -> {
      String charge = Provider.charge(f.ds, attempt.callKey().value(), 40);
      flaky.failing.set(1); // the connection dies as the provider answers
      return charge;
    });
    assertThat(e.applied()).isTrue();
    assertThat(state(key)).isEqualTo("C");
    assertThat(f.column(key, f.resultText())).isEqualTo(e.value());
    assertThat(f.count("SELECT count(*) FROM provider_charges WHERE call_key = ?", Keys.child(key, "external").value())).isEqualTo(1);
  }

  @Test
  void aRecordThatFailsForGoodIsRecordedInTheBackgroundOnceTheDatabaseAnswers() throws Exception {
    Flaky flaky = new Flaky(f.ds);
    IdempotentExecutor executor = Idem.builder(flaky).build().executor().lease(Duration.ofSeconds(30))
        .inFlightWait(Duration.ofMillis(500)).build();
    IdempotencyKey key = IdempotencyKey.of("record", UUID.randomUUID().toString());
    AtomicInteger calls = new AtomicInteger();
    String[] charge = new String[1];
    assertThatThrownBy(() -> executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), attempt -> {
      calls.incrementAndGet();
      charge[0] = Provider.charge(f.ds, attempt.callKey().value(), 40);
      flaky.failing.set(15); // every record try of the call fails, and the first tries in the background
      return charge[0];
    })).isInstanceOf(DataAccessException.class);

    dev.idem.testing.Poll.until("the record made in the background", () -> "C".equals(state(key)));
    assertThat(flaky.failing).as("the background went on through failed tries").hasValue(0);
    assertThat(f.column(key, f.resultText())).isEqualTo(charge[0]);
    assertThat(f.column(key, "fence")).isEqualTo("1");

    Execution<String> retry = executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), attempt -> {
      calls.incrementAndGet();
      return Provider.charge(f.ds, attempt.callKey().value(), 40);
    }, attempt -> Provider.lookUp(f.ds, attempt.callKey().value()));
    assertThat(retry.replayed()).isTrue();
    assertThat(retry.value()).isEqualTo(charge[0]);
    assertThat(calls).as("no second call").hasValue(1);
    assertThat(f.count("SELECT calls FROM provider_charges WHERE call_key = ?", Keys.child(key, "external").value())).isEqualTo(1);
  }

  /** A call that throws while the database is away: its lease end is made in the background once it answers. */
  @Test
  void aLeaseEndThatFailsIsMadeInTheBackgroundOnceTheDatabaseAnswers() throws Exception {
    Flaky flaky = new Flaky(f.ds);
    IdempotentExecutor executor = Idem.builder(flaky).build().executor().lease(Duration.ofSeconds(30)).build();
    IdempotencyKey key = IdempotencyKey.of("record", UUID.randomUUID().toString());
    assertThatThrownBy(() -> executor.executeExternal(key, Fingerprint.EMPTY, Codec.utf8(), attempt -> {
      flaky.failing.set(3); // the lease end and the first background tries fail
      throw new java.io.IOException("provider timed out (test)");
    })).isInstanceOf(java.io.IOException.class);
    dev.idem.testing.Poll.until("the lease ended in the background", () -> f.leaseEnded(key));
    assertThat(flaky.failing).hasValue(0);
    assertThat(state(key)).as("the outcome is unknown: in flight, for a repeat to take over").isEqualTo("I");
  }
}
