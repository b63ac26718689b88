package dev.idem.kafka;

import com.zaxxer.hikari.HikariDataSource;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.outbox.OutboxMessage;
import dev.idem.jdbc.outbox.Publisher;
import dev.idem.testing.Proxies;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import javax.sql.DataSource;

/**
 * A relay or a consumer in its own JVM, for {@link KafkaCrashTest}, that says on stdout when it has
 * reached the moment to be killed at and then hangs there, so the parent kills it right there. The
 * hangs are sleeps, but nothing is ordered by them: the parent waits for the printed line, and the
 * sleep only bounds how long a child it failed to kill lives on.
 *
 * <ul>
 *   <li>{@code relay JDBC BOOTSTRAP}: relays one batch to Kafka; once Kafka acknowledged it, prints
 *       {@code PUBLISHED} and hangs before the relay marks the messages sent.
 *   <li>{@code consumer JDBC BOOTSTRAP GROUP TOPIC}: consumes through a {@link KafkaInbox}; once its
 *       first batch's transaction committed, prints {@code COMMITTED} and hangs before the offsets are
 *       committed.
 *   <li>{@code poison JDBC BOOTSTRAP GROUP TOPIC}: consumes through a {@link KafkaInbox} with at most 2
 *       attempts; the effect of the record whose value is {@code poison} prints {@code POISON} and
 *       halts the JVM (as a record that crashes its consumer does), the others apply.
 * </ul>
 */
public final class CrashChild {
  public static void main(String[] args) throws Exception {
    if (args[0].equals("poison")) {
      System.setProperty("org.slf4j.simpleLogger.log.dev.idem.kafka", "info"); // before any logger is made
    }
    HikariDataSource pool = new HikariDataSource();
    pool.setJdbcUrl(args[1]);
    pool.setMaximumPoolSize(3);
    if (args[0].equals("relay")) {
      Idem idem = Idem.builder(pool).build();
      KafkaPublisher kafka = KafkaPublisher.builder(args[2]).build();
      Publisher hangsAfterAck = new Publisher() {
        @Override
        public void publish(OutboxMessage m) throws Exception {
          kafka.publish(m);
        }

        @Override
        public List<Throwable> publishAll(List<OutboxMessage> batch) throws Exception {
          List<Throwable> outcomes = kafka.publishAll(batch);
          System.out.println("PUBLISHED " + outcomes.stream().filter(o -> o == null).count());
          System.out.flush();
          Thread.sleep(120_000); // killed here, between publish and mark
          return outcomes;
        }
      };
      idem.relay(hangsAfterAck).batchSize(100).build().runOnce();
    } else if (args[0].equals("poison")) {
      Idem idem = Idem.builder(pool).build();
      KafkaInbox consumer = KafkaInbox.builder(idem.inbox("crash").build(), (tx, r) -> {
            if (new String(r.value(), java.nio.charset.StandardCharsets.UTF_8).equals("poison")) {
              System.out.println("POISON");
              System.out.flush();
              Runtime.getRuntime().halt(1);
            }
            KafkaCrashTest.EFFECT.apply(tx, r);
          })
          .bootstrapServers(args[2]).groupId(args[3]).topics(args[4]).deadLetterTopic(args[4] + ".dead")
          .pollTimeout(Duration.ofMillis(100)).maxAttempts(2)
          .config(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 2000).config(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500)
          .build();
      consumer.start();
      Thread.sleep(120_000);
    } else {
      Idem idem = Idem.builder(hangingAfterCommit(pool)).build();
      KafkaInbox consumer = KafkaInbox.builder(idem.inbox("crash").build(), KafkaCrashTest.EFFECT)
          .bootstrapServers(args[2]).groupId(args[3]).topics(args[4]).deadLetterTopic(args[4] + ".dead")
          .pollTimeout(Duration.ofMillis(100))
          // Killed, it stays a member of the group until its session times out: keep that short.
          .config(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 2000).config(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 500)
          .build();
      consumer.start();
      Thread.sleep(120_000); // the consumer runs on its own thread; the process is killed while this waits
    }
    System.out.println("NOT KILLED");
  }

  /** A data source whose connections, after a commit, say so and hang: the offsets are never committed. */
  static DataSource hangingAfterCommit(DataSource pool) {
    return (DataSource) Proxy.newProxyInstance(CrashChild.class.getClassLoader(), new Class<?>[] {DataSource.class},
        (p, m, a) -> {
          Object result = Proxies.invoke(m, pool, a);
          if (!(result instanceof Connection c)) {
            return result;
          }
          return Proxy.newProxyInstance(CrashChild.class.getClassLoader(), new Class<?>[] {Connection.class}, (cp, cm, ca) -> {
            Object r = Proxies.invoke(cm, c, ca);
            if (cm.getName().equals("commit")) {
              System.out.println("COMMITTED");
              System.out.flush();
              Thread.sleep(120_000); // killed here, after the database commit, before the offset commit
            }
            return r;
          });
        });
  }
}
