package dev.idem.benchmarks.messaging;

import com.sun.management.OperatingSystemMXBean;
import dev.idem.benchmarks.RepeatBenchmark;
import dev.idem.jdbc.inbox.BatchEffect;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.inbox.Received;
import dev.idem.kafka.KafkaInbox;
import dev.idem.kafka.KafkaPublisher;
import dev.idem.testing.TestKafka;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.camel.processor.idempotent.jdbc.JdbcMessageIdRepository;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.springframework.integration.jdbc.metadata.JdbcMetadataStore;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.KafkaMessageListenerContainer;
import org.springframework.kafka.listener.MessageListener;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Kafka to the database, the same records and the same effect (one {@code payments} row per
 * message, {@link RepeatBenchmark#pay}) for every contender, on an in-process broker ({@link
 * TestKafka}) and {@link RepeatBenchmark.Db}'s pool and database, in one JVM:
 *
 * <ul>
 *   <li>{@code receiveAll}: the records, read once into memory, given to {@link Inbox#receiveAll}
 *       in batches of 500 in poll order: no Kafka at all, the yardstick.
 *   <li>{@code kafkaInbox}: {@link KafkaInbox}, a new group, polls of 500.
 *   <li>{@code handLoop}: a bare {@link KafkaConsumer} loop: poll, {@code receiveAll}, {@code
 *       commitSync} of the offsets; what Kafka itself adds, without KafkaInbox's bookkeeping.
 *   <li>{@code springKafkaSi}, {@code springKafkaCamel}: a Spring Kafka record listener (container
 *       defaults: ack mode {@code BATCH}), each record in one Spring transaction in which Spring
 *       Integration's {@code JdbcMetadataStore.putIfAbsent} or Camel's {@code
 *       JdbcMessageIdRepository.add} and the effect run: the peers as their docs show them. They
 *       take the first quarter of the records (they are slow; the rate is records over time).
 * </ul>
 *
 * Each contender consumes as a new consumer (inbox name, group, region) so every id is new. The
 * contenders alternate in each round, every other round in reverse order, and each line gives the
 * load average and this JVM's CPU per message. Run: {@code java -cp
 * idem-benchmarks/target/benchmarks.jar dev.idem.benchmarks.messaging.KafkaInboxBench [rounds] [N]
 * [contender,...]} (default 3 rounds after a warm-up round, N = 40,000).
 */
public final class KafkaInboxBench {
  private static final int BATCH = 500;
  private static final byte[] PAYLOAD = new byte[200];
  private static final String TOPIC = "kafka-inbox-bench";

  interface Contender {
    /** Consumes (the first {@code n} of) the topic as consumer {@code name}; returns the messages applied. */
    int run(String name, int n) throws Exception;
  }

  private final TestKafka kafka;
  private final RepeatBenchmark.Db db;
  private final List<ConsumerRecord<byte[], byte[]>> inMemory;

  private KafkaInboxBench(TestKafka kafka, RepeatBenchmark.Db db, List<ConsumerRecord<byte[], byte[]>> inMemory) {
    this.kafka = kafka;
    this.db = db;
    this.inMemory = inMemory;
  }

  public static void main(String[] args) throws Exception {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 3;
    int n = args.length > 1 ? Integer.parseInt(args[1]) : 40_000;
    List<String> only = args.length > 2 ? List.of(args[2].split(",")) : null;
    try (TestKafka kafka = TestKafka.start()) {
      RepeatBenchmark.Db db = new RepeatBenchmark.Db();
      db.start();
      kafka.createTopic(TOPIC, 4);
      publish(kafka, n);
      KafkaInboxBench bench = new KafkaInboxBench(kafka, db, kafka.records(TOPIC));
      check(bench.inMemory.size() == n, "read back " + bench.inMemory.size() + " of " + n);
      Map<String, Contender> all = new LinkedHashMap<>();
      all.put("receiveAll", bench::receiveAll);
      all.put("kafkaInbox", bench::kafkaInbox);
      all.put("handLoop", bench::handLoop);
      all.put("springKafkaSi", (name, m) -> bench.springKafka(name, m / 4, springIntegration(db, name)));
      all.put("springKafkaCamel", (name, m) -> bench.springKafka(name, m / 4, camel(db, name)));
      if (only != null) {
        all.keySet().retainAll(only);
      }
      List<String> order = new ArrayList<>(all.keySet());
      Map<String, List<Double>> rates = new LinkedHashMap<>();
      OperatingSystemMXBean os = ManagementFactory.getPlatformMXBean(OperatingSystemMXBean.class);
      for (int r = 0; r <= rounds; r++) { // round 0 warms up
        List<String> now = new ArrayList<>(order);
        if (r % 2 == 1) {
          java.util.Collections.reverse(now);
        }
        for (String c : now) {
          String name = c.toLowerCase() + "-" + r;
          long cpu0 = os.getProcessCpuTime();
          long t0 = System.nanoTime();
          int done = all.get(c).run(name, n);
          long took = System.nanoTime() - t0;
          long cpu = os.getProcessCpuTime() - cpu0;
          double rate = done * 1e9 / took;
          System.out.printf("round %d %-16s %,9.0f msg/s  %6.1f us JVM CPU/msg  load %s%n", r, c, rate, cpu / 1e3 / done, load());
          if (r > 0) {
            rates.computeIfAbsent(c, k -> new ArrayList<>()).add(rate);
          }
        }
      }
      System.out.printf("%n| contender | msg/s, median of %d rounds | each round |%n|---|---:|---|%n", rounds);
      for (Map.Entry<String, List<Double>> e : rates.entrySet()) {
        System.out.printf("| %s | %,.0f | %s |%n", e.getKey(), Rounds.median(e.getValue()), Rounds.each(e.getValue()));
      }
      if (rates.containsKey("kafkaInbox")) {
        for (String other : rates.keySet()) {
          if (!other.equals("kafkaInbox")) {
            StringBuilder each = new StringBuilder();
            for (int i = 0; i < rates.get(other).size(); i++) {
              each.append(each.length() == 0 ? "" : ", ").append(String.format("%.2f", rates.get("kafkaInbox").get(i) / rates.get(other).get(i)));
            }
            System.out.printf("kafkaInbox / %s, round by round: %s%n", other, each);
          }
        }
      }
      db.stop();
    }
  }

  private static String load() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
    } catch (Exception e) {
      return "?";
    }
  }

  /** {@code n} records over 4 partitions: a UUID id header, a 64-key aggregate key, 200 bytes. */
  private static void publish(TestKafka kafka, int n) throws Exception {
    Map<String, Object> config = Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers(),
        ProducerConfig.LINGER_MS_CONFIG, 5, ProducerConfig.ACKS_CONFIG, "all");
    try (KafkaProducer<byte[], byte[]> p = new KafkaProducer<>(config, new ByteArraySerializer(), new ByteArraySerializer())) {
      for (int i = 0; i < n; i++) {
        ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(TOPIC, ("k" + i % 64).getBytes(StandardCharsets.UTF_8), PAYLOAD);
        r.headers().add(KafkaPublisher.DEFAULT_ID_HEADER, UUID.randomUUID().toString().getBytes(StandardCharsets.UTF_8));
        p.send(r);
      }
      p.flush();
    }
  }

  private static String idOf(ConsumerRecord<byte[], byte[]> r) {
    return new String(r.headers().lastHeader(KafkaPublisher.DEFAULT_ID_HEADER).value(), StandardCharsets.UTF_8);
  }

  private BatchEffect<ConsumerRecord<byte[], byte[]>> effect(AtomicInteger applied) {
    return (tx, r) -> {
      RepeatBenchmark.pay(tx.connection(), idOf(r));
      applied.incrementAndGet();
    };
  }

  int receiveAll(String name, int n) {
    Inbox inbox = db.freshIdem().inbox(name).build();
    AtomicInteger applied = new AtomicInteger();
    BatchEffect<ConsumerRecord<byte[], byte[]>> effect = effect(applied);
    for (int from = 0; from < inMemory.size(); from += BATCH) {
      Received<ConsumerRecord<byte[], byte[]>> r = inbox.receiveAll(inMemory.subList(from, Math.min(from + BATCH, inMemory.size())),
          KafkaInboxBench::idOf, effect);
      check(r.failed().isEmpty() && r.inFlight().isEmpty(), "receiveAll failed: " + r.failed());
    }
    checkInbox(name, n);
    return n;
  }

  int kafkaInbox(String name, int n) throws Exception {
    AtomicInteger applied = new AtomicInteger();
    Inbox inbox = db.freshIdem().inbox(name).build();
    try (KafkaInbox consumer = KafkaInbox.builder(inbox, effect(applied)).bootstrapServers(kafka.bootstrapServers())
        .groupId(name).topics(TOPIC).deadLetterTopic(TOPIC + ".dead").pollTimeout(Duration.ofMillis(50)).build()) {
      consumer.start();
      while (applied.get() < n) { // counted in the effects, before their commit: no query load while it runs
        Thread.sleep(1);
      }
      while (inboxRows(name) < n) { // then the last batch's commit
        Thread.sleep(1);
      }
    }
    checkInbox(name, n);
    return n;
  }

  int handLoop(String name, int n) {
    AtomicInteger applied = new AtomicInteger();
    BatchEffect<ConsumerRecord<byte[], byte[]>> effect = effect(applied);
    Inbox inbox = db.freshIdem().inbox(name).build();
    try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerConfig(name), new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      c.subscribe(List.of(TOPIC));
      int done = 0;
      while (done < n) {
        ConsumerRecords<byte[], byte[]> records = c.poll(Duration.ofMillis(50));
        if (records.isEmpty()) {
          continue;
        }
        List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>(records.count());
        records.forEach(batch::add);
        Received<ConsumerRecord<byte[], byte[]>> r = inbox.receiveAll(batch, KafkaInboxBench::idOf, effect);
        check(r.failed().isEmpty() && r.inFlight().isEmpty(), "receiveAll failed: " + r.failed());
        Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
        for (TopicPartition tp : records.partitions()) {
          List<ConsumerRecord<byte[], byte[]>> rs = records.records(tp);
          offsets.put(tp, new OffsetAndMetadata(rs.get(rs.size() - 1).offset() + 1));
        }
        c.commitSync(offsets);
        done += batch.size();
      }
    }
    checkInbox(name, n);
    return n;
  }

  private Map<String, Object> consumerConfig(String group) {
    return Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers(), ConsumerConfig.GROUP_ID_CONFIG, group,
        ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest", ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false,
        ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
  }

  /** A peer's store: adds the id, true if it was new. */
  interface Store {
    boolean add(String id);
  }

  private static Store springIntegration(RepeatBenchmark.Db db, String region) {
    JdbcMetadataStore s = new JdbcMetadataStore(db.ds);
    s.setRegion(region);
    s.afterPropertiesSet();
    s.start();
    return id -> s.putIfAbsent(id, "1") == null;
  }

  private static Store camel(RepeatBenchmark.Db db, String processor) {
    JdbcMessageIdRepository r = new JdbcMessageIdRepository(db.ds, processor);
    r.setCreateTableIfNotExists(false);
    r.start();
    return r::add;
  }

  /** A Spring Kafka listener, each record in one Spring transaction with the peer's store and the effect; the first {@code n} records. */
  int springKafka(String group, int n, Store store) throws Exception {
    TransactionTemplate tt = new TransactionTemplate(new DataSourceTransactionManager(db.ds));
    AtomicInteger applied = new AtomicInteger();
    ContainerProperties props = new ContainerProperties(TOPIC);
    props.setGroupId(group);
    props.setPollTimeout(50);
    // counted after each record's transaction committed (the template returns after the commit)
    props.setMessageListener((MessageListener<byte[], byte[]>) r -> {
      tt.executeWithoutResult(status -> {
        String id = idOf(r);
        if (store.add(id)) {
          Connection c = DataSourceUtils.getConnection(db.ds);
          try {
            RepeatBenchmark.pay(c, id);
          } catch (java.sql.SQLException e) {
            throw new IllegalStateException(e);
          } finally {
            DataSourceUtils.releaseConnection(c, db.ds);
          }
        }
      });
      applied.incrementAndGet();
    });
    KafkaMessageListenerContainer<byte[], byte[]> container = new KafkaMessageListenerContainer<>(
        new DefaultKafkaConsumerFactory<>(consumerConfig(group), new ByteArrayDeserializer(), new ByteArrayDeserializer()), props);
    container.start();
    try {
      while (applied.get() < n) {
        Thread.sleep(1);
      }
    } finally {
      container.stop();
    }
    return applied.get();
  }

  private long inboxRows(String consumer) throws Exception {
    try (Connection c = db.ds.getConnection(); PreparedStatement ps = c.prepareStatement("SELECT count(*) FROM idem.idem_inbox WHERE consumer = ?")) {
      ps.setString(1, consumer);
      try (ResultSet rs = ps.executeQuery()) {
        rs.next();
        return rs.getLong(1);
      }
    }
  }

  private void checkInbox(String consumer, int n) {
    try {
      check(inboxRows(consumer) == n, "inbox " + consumer + " holds " + inboxRows(consumer) + " rows, expected " + n);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  private static void check(boolean ok, String what) {
    if (!ok) {
      throw new IllegalStateException(what);
    }
  }
}
