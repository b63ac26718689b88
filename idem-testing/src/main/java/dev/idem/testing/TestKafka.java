package dev.idem.testing;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;
import kafka.server.KafkaConfig;
import kafka.server.KafkaRaftServer;
import kafka.tools.StorageTool;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.utils.Time;

/**
 * A real Kafka broker in this JVM: one node that is broker and KRaft controller at once, on
 * 127.0.0.1, its log in a temporary directory. Started from the Maven artifacts ({@code
 * org.apache.kafka:kafka_2.13}, which a module using this declares), so a test needs only Java and
 * Maven. {@link #restart()} stops it and starts it again on the same port and log, as a broker
 * restart in production would. One per test class: a start takes a few seconds.
 */
public final class TestKafka implements AutoCloseable {
  private static final Duration BOUND = Duration.ofSeconds(60);

  private final Path dir;
  private final int port;
  private final Properties config;
  private KafkaRaftServer server;

  private TestKafka(Path dir, int port, int controllerPort) {
    this.dir = dir;
    this.port = port;
    Properties p = new Properties();
    p.put("process.roles", "broker,controller");
    p.put("node.id", "1");
    p.put("controller.quorum.voters", "1@127.0.0.1:" + controllerPort);
    p.put("listeners", "PLAINTEXT://127.0.0.1:" + port + ",CONTROLLER://127.0.0.1:" + controllerPort);
    p.put("advertised.listeners", "PLAINTEXT://127.0.0.1:" + port);
    p.put("controller.listener.names", "CONTROLLER");
    p.put("inter.broker.listener.name", "PLAINTEXT");
    p.put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT");
    p.put("log.dirs", dir.resolve("log").toString());
    // One node: every internal topic with one replica, and few partitions (each one is files and
    // threads; a small machine starts faster with 4 than with Kafka's 50).
    p.put("offsets.topic.replication.factor", "1");
    p.put("offsets.topic.num.partitions", "4");
    p.put("transaction.state.log.replication.factor", "1");
    p.put("transaction.state.log.min.isr", "1");
    p.put("transaction.state.log.num.partitions", "4");
    p.put("share.coordinator.state.topic.replication.factor", "1");
    p.put("share.coordinator.state.topic.min.isr", "1");
    p.put("group.initial.rebalance.delay.ms", "0");
    // A test may kill a consumer: let it ask for a short session, so its partitions move soon.
    p.put("group.min.session.timeout.ms", "1000");
    p.put("auto.create.topics.enable", "true");
    p.put("num.partitions", "1");
    p.put("num.network.threads", "2");
    p.put("num.io.threads", "2");
    this.config = p;
  }

  /** Formats a new log directory and starts the broker; waits until it answers. */
  public static TestKafka start() {
    try {
      Path dir = Files.createTempDirectory("idem-kafka");
      TestKafka kafka = new TestKafka(dir, freePort(), freePort());
      kafka.format();
      kafka.startServer();
      return kafka;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** {@code host:port} for the clients' {@code bootstrap.servers}; the same across {@link #restart()}. */
  public String bootstrapServers() {
    return "127.0.0.1:" + port;
  }

  /** Stops the broker (a clean shutdown) and starts it again on the same port and log. */
  public synchronized void restart() {
    stopServer();
    startServer();
  }

  /** Creates {@code topic} with {@code partitions} partitions (one replica); an existing one is kept. */
  public void createTopic(String topic, int partitions) {
    try (Admin admin = admin()) {
      admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all().get(BOUND.toSeconds(), TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      if (!(e.getCause() instanceof TopicExistsException)) {
        throw new IllegalStateException("could not create topic " + topic, e.getCause());
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted creating topic " + topic, e);
    } catch (TimeoutException e) {
      throw new IllegalStateException("topic " + topic + " not created within " + BOUND, e);
    }
  }

  /** An admin client of this broker; the caller closes it. */
  public Admin admin() {
    return Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers()));
  }

  /**
   * Every record of {@code topic} now, from the first offset to the end of each partition (read
   * committed), in partition and offset order. Waits at most a minute.
   */
  public List<ConsumerRecord<byte[], byte[]>> records(String topic) {
    Map<String, Object> config = Map.of(
        ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrapServers(),
        ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed",
        ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      List<TopicPartition> partitions = consumer.partitionsFor(topic, BOUND).stream()
          .map(p -> new TopicPartition(topic, p.partition()))
          .sorted(Comparator.comparingInt(TopicPartition::partition))
          .toList();
      Map<TopicPartition, Long> end = consumer.endOffsets(partitions, BOUND);
      consumer.assign(partitions);
      consumer.seekToBeginning(partitions);
      List<ConsumerRecord<byte[], byte[]>> all = new ArrayList<>();
      long deadline = System.nanoTime() + BOUND.toNanos();
      while (partitions.stream().anyMatch(tp -> consumer.position(tp, BOUND) < end.get(tp))) {
        if (System.nanoTime() - deadline > 0) {
          throw new IllegalStateException("could not read " + topic + " to its end within " + BOUND);
        }
        consumer.poll(Duration.ofMillis(200)).forEach(all::add);
      }
      all.sort(Comparator.<ConsumerRecord<byte[], byte[]>>comparingInt(ConsumerRecord::partition).thenComparingLong(ConsumerRecord::offset));
      return all;
    }
  }

  /** Stops the broker and deletes its log. */
  @Override
  public synchronized void close() {
    stopServer();
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
    } catch (IOException e) {
      // a temporary directory left behind is no failure of the test
    }
  }

  private void format() throws IOException {
    Path file = dir.resolve("server.properties");
    try (OutputStream out = Files.newOutputStream(file)) {
      config.store(out, "idem TestKafka");
    }
    ByteArrayOutputStream printed = new ByteArrayOutputStream();
    int exit = StorageTool.execute(new String[] {"format", "-c", file.toString(), "-t", Uuid.randomUuid().toString()},
        new PrintStream(printed, true, StandardCharsets.UTF_8));
    if (exit != 0) {
      throw new IllegalStateException("formatting the Kafka log failed: " + printed.toString(StandardCharsets.UTF_8));
    }
  }

  private synchronized void startServer() {
    KafkaRaftServer s = new KafkaRaftServer(new KafkaConfig(config, false), Time.SYSTEM);
    s.startup();
    server = s;
    // Ready when it answers for the cluster's nodes.
    try (Admin admin = admin()) {
      admin.describeCluster().nodes().get(BOUND.toSeconds(), TimeUnit.SECONDS);
    } catch (ExecutionException | TimeoutException e) {
      throw new IllegalStateException("the Kafka broker did not answer within " + BOUND, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted starting Kafka", e);
    }
  }

  private synchronized void stopServer() {
    if (server != null) {
      server.shutdown();
      server.awaitShutdown();
      server = null;
    }
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      s.setReuseAddress(true);
      return s.getLocalPort();
    }
  }
}
