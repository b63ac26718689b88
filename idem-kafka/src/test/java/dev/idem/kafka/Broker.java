package dev.idem.kafka;

import dev.idem.testing.TestKafka;

/**
 * One in-process Kafka broker for all of this module's test classes, rather than {@code @IdemTest}'s
 * broker per class: each start costs seconds (measured: about 10 s for the first in a JVM, 1.4 s
 * and 0.4 s to stop for each one after), and the classes' topics and groups have names of their own.
 */
final class Broker {
  private static TestKafka kafka;

  private Broker() {}

  static synchronized TestKafka shared() {
    if (kafka == null) {
      kafka = TestKafka.start();
      TestKafka k = kafka;
      Runtime.getRuntime().addShutdownHook(new Thread(k::close));
    }
    return kafka;
  }
}
