package dev.idem.jdbc;

import static dev.idem.testing.Delivery.CONCURRENT;
import static dev.idem.testing.Delivery.KILLED_AFTER_COMMIT;
import static dev.idem.testing.Delivery.KILLED_BEFORE_COMMIT;
import static dev.idem.testing.Delivery.REPLY_LOST;
import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.Delivery;
import dev.idem.testing.Effects;
import dev.idem.testing.FaultyDataSource;
import dev.idem.testing.IdemTest;
import dev.idem.testing.RepeatReport;
import dev.idem.testing.Repeats;
import dev.idem.testing.Targets;
import dev.idem.window.DedupeWindow;
import java.time.Duration;
import java.util.List;
import javax.sql.DataSource;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

/**
 * The connection of a call killed as it commits, on either database (PostgreSQL:
 * pg_terminate_backend; MariaDB: KILL CONNECTION, by {@link FaultyDataSource}): killed before the
 * commit nothing of the call is kept and the redelivered copy applies; killed after it, the call
 * fails as the connection died, the copy is not acknowledged, and its redelivery is answered from
 * the row, never run again. For the executor (callback and statements) and the inbox (one message
 * and a batch), besides concurrent copies and a lost reply; counted in the effect's table, one row
 * per intent.
 */
@IdemTest(poolSize = 12, sql = "CREATE TABLE charges (order_id varchar(100) NOT NULL)")
class KilledAtCommitTest {

  /** A copy answered in flight (another copy holds its key) is left unacknowledged: delivered again. */
  private static void acknowledged(Execution<?> e) {
    if (e.inFlight()) {
      throw new IllegalStateException("in flight: not acknowledged");
    }
  }

  /** Every way of delivering, each kill shown to have hit the call's one writing commit. */
  private static void oneEffectPerIntent(Repeats repeats, FaultyDataSource service) {
    RepeatReport report = repeats.faults(service).deliver(CONCURRENT, REPLY_LOST, KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT).run();
    report.assertOneEffectPerIntent();
    for (Delivery killing : new Delivery[] {KILLED_BEFORE_COMMIT, KILLED_AFTER_COMMIT}) {
      assertThat(report.trials()).as("%s: not vacuous, a writing commit was killed", killing)
          .filteredOn(t -> t.delivery() == killing).extracting(RepeatReport.Trial::variant)
          .anySatisfy(v -> assertThat(v).contains("writing commit 1 of"));
    }
  }

  private static Repeats charges(DataSource pool) {
    return Repeats.of(Effects.in(pool, "charges", "order_id"));
  }

  @Test
  void anExecutorCallbackKilledAtItsCommitCommitsOneEffect(FaultyDataSource service, DataSource pool) {
    IdempotentExecutor executor = Idem.builder(service).build().executor().inFlightWait(Duration.ofSeconds(10)).build();
    oneEffectPerIntent(charges(pool).target(Targets.handler(copy -> acknowledged(executor.execute(
        IdempotencyKey.of("killed-callback", copy.key()), Fingerprint.EMPTY, Codec.utf8(), tx -> {
          tx.dsl().execute("INSERT INTO charges VALUES (?)", copy.intent());
          return "charged";
        })))), service);
  }

  @Test
  void anExecutorsStatementsKilledAtTheirCommitCommitOneEffect(FaultyDataSource service, DataSource pool) {
    IdempotentExecutor executor = Idem.builder(service).build().executor().inFlightWait(Duration.ofSeconds(10)).build();
    oneEffectPerIntent(charges(pool).target(Targets.handler(copy -> acknowledged(executor.execute(
        IdempotencyKey.of("killed-statements", copy.key()), Fingerprint.EMPTY,
        DSL.query("INSERT INTO charges VALUES (?)", copy.intent()))))), service);
  }

  @Test
  void anInboxReceiveKilledAtItsCommitCommitsOneEffect(FaultyDataSource service, DataSource pool) {
    Inbox inbox = Idem.builder(service).build().inbox("killed").window(DedupeWindow.of(Duration.ofDays(1)))
        .inFlightWait(Duration.ofSeconds(10)).build();
    oneEffectPerIntent(charges(pool).target(Targets.handler(copy -> acknowledged(inbox.receive(copy.key(),
        tx -> tx.dsl().execute("INSERT INTO charges VALUES (?)", copy.intent()))))), service);
  }

  @Test
  void anInboxBatchKilledAtItsCommitCommitsOneEffect(FaultyDataSource service, DataSource pool) {
    Inbox inbox = Idem.builder(service).build().inbox("killed-batch").window(DedupeWindow.of(Duration.ofDays(1)))
        .inFlightWait(Duration.ofSeconds(10)).build();
    oneEffectPerIntent(charges(pool).target(Targets.handler(copy -> {
      var received = inbox.receiveAll(List.of(copy.key()), m -> m, (tx, m) -> tx.dsl().execute("INSERT INTO charges VALUES (?)",
          copy.intent()));
      if (!received.inFlight().isEmpty() || !received.failed().isEmpty()) {
        throw new IllegalStateException("not settled: not acknowledged");
      }
    })), service);
  }
}
