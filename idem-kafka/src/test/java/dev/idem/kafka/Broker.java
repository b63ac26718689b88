package dev.idem.kafka;

import dev.idem.testing.TestKafka;

/** One in-process Kafka broker for all of this module's test classes: a start costs seconds. */
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
