package dev.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The lab with its queue hop over a real Kafka broker ({@code --queue=kafka}) counts what it counts
 * in process: the same payment rows, charges, receipts and breaks.
 */
class LabOverKafkaTest {

  @AfterEach
  void backToMemory() {
    LabQueue.use(LabQueue.Kind.MEMORY);
  }

  static String run(String... args) throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    Tour.run(Tour.parse(args), new PrintStream(bytes, true, StandardCharsets.UTF_8));
    return bytes.toString(StandardCharsets.UTF_8);
  }

  /** The lines for scripts: counts and breaks per scenario. */
  static List<String> counts(String output) {
    return output.lines().filter(l -> l.startsWith("scenario=") || l.startsWith("breaks scenario=")).toList();
  }

  @Test
  void theScenariosThatCrossTheQueueCountTheSameOverKafkaAsInProcess() throws Exception {
    // Those whose faults reach the relay, the queue or the worker; the others never differ by queue.
    List<String> crossing = List.of("worker-crash-inbox-only", "worker-crash-provider-key", "all-broken-webhook-only", "all-broken-all-guards");
    String scenarios = String.join(",", crossing);
    String inProcess = run("--scenario=" + scenarios);
    String overKafka = run("--scenario=" + scenarios, "--queue=kafka");

    assertThat(overKafka).contains("queue: a Kafka broker in this JVM");
    assertThat(counts(inProcess)).hasSize(2 * crossing.size());
    assertThat(counts(overKafka)).isEqualTo(counts(inProcess));
    // the runs over Kafka did cross it: the relay's republished copy was caught by the worker's inbox
    assertThat(overKafka).contains("scenario=all-broken-all-guards payment_rows=1 charges=1 receipts=1");
  }

  @Test
  void theQueueOptionIsParsed() throws Exception {
    assertThat(Tour.parse(new String[] {"--queue=kafka"}).queue()).isEqualTo(LabQueue.Kind.KAFKA);
    assertThat(Tour.parse(new String[] {}).queue()).isEqualTo(LabQueue.Kind.MEMORY);
    assertThat(Tour.usage()).contains("--queue=memory|kafka");
  }
}
