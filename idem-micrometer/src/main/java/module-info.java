/**
 * idem's events and outbox as Micrometer meters ({@link dev.idem.micrometer.IdemMetrics}, {@link
 * dev.idem.micrometer.IdemGauges}), and relay publishes as Micrometer observations ({@link
 * dev.idem.micrometer.ObservedPublisher}).
 */
module dev.idem.micrometer {
  requires transitive dev.idem.core;
  requires transitive dev.idem.jdbc;
  requires transitive micrometer.core;
  requires transitive micrometer.observation;
  requires org.slf4j;

  exports dev.idem.micrometer;
}
