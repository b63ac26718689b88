/**
 * idem core: the rules of idempotency and exactly-once effects, in pure Java.
 *
 * <p>Keys and their derivation, request fingerprints, the outcome of a conditional step, fencing
 * tokens, dedupe windows, what a recognised repeat gets back, and the listener interface. Storage
 * lives in other modules ({@code dev.idem.jdbc}); nothing here touches I/O.
 */
module dev.idem.core {
  exports dev.idem;
  exports dev.idem.key;
  exports dev.idem.transition;
  exports dev.idem.fence;
  exports dev.idem.window;
  exports dev.idem.result;
  exports dev.idem.event;
  // Helpers shared by idem's own modules; not an API.
  exports dev.idem.internal to dev.idem.jdbc, dev.idem.jackson, dev.idem.kafka, dev.idem.debezium;
  exports dev.idem.internal.base to dev.idem.jdbc, dev.idem.jackson, dev.idem.kafka, dev.idem.debezium;
}
