package dev.idem.kafka;

import dev.idem.testing.TestKafka;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/** A consumer group's committed offsets, read from the broker. */
final class Offsets {
  private Offsets() {}

  /** Whether {@code group} has committed, for every partition of {@code topic}, the partition's end offset. */
  static boolean committedToEnd(TestKafka kafka, String group, String topic) {
    try (Admin admin = kafka.admin()) {
      Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group)
          .partitionsToOffsetAndMetadata().get(10, TimeUnit.SECONDS);
      var partitions = admin.describeTopics(java.util.List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS)
          .get(topic).partitions().stream().map(p -> new TopicPartition(topic, p.partition())).toList();
      Map<TopicPartition, OffsetSpec> latest = partitions.stream().collect(Collectors.toMap(tp -> tp, tp -> OffsetSpec.latest()));
      var ends = admin.listOffsets(latest).all().get(10, TimeUnit.SECONDS);
      for (TopicPartition tp : partitions) {
        long end = ends.get(tp).offset();
        OffsetAndMetadata c = committed.get(tp);
        if (end > 0 && (c == null || c.offset() < end)) {
          return false;
        }
      }
      return true;
    } catch (Exception e) {
      return false; // the broker restarting: not yet
    }
  }

  /**
   * Sets {@code group}'s offset of partition 0 of {@code topic} back to 0, once the group has no
   * member left (a killed member stays until its session times out: tried again until then).
   */
  static void rewind(TestKafka kafka, String group, String topic) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (true) {
      try (Admin admin = kafka.admin()) {
        admin.alterConsumerGroupOffsets(group, Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(0)))
            .all().get(30, TimeUnit.SECONDS);
        return;
      } catch (java.util.concurrent.ExecutionException e) {
        if (System.nanoTime() > deadline) {
          throw e;
        }
        Thread.sleep(500); // the group still has a member
      }
    }
  }
}
