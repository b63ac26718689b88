package dev.idem.jdbc.ops;

import java.time.OffsetDateTime;
import java.util.UUID;

/**
 * An outbox message the relay gave up on after its max attempts; it stays until re-driven.
 *
 * @param aggregateKey null if the message has none
 * @param lastError the last publish failure the relay recorded, or null
 * @param parkedSince when the relay parked it, by the database clock
 */
public record ParkedMessage(UUID id, String topic, String aggregateKey, int attempts, String lastError, OffsetDateTime parkedSince) {}
