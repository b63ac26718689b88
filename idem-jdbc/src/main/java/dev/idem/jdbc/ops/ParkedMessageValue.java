package dev.idem.jdbc.ops;

import java.time.OffsetDateTime;
import java.util.UUID;

/** The one implementation of {@link ParkedMessage}: a value, built by idem only. */
record ParkedMessageValue(UUID id, String topic, String aggregateKey, int attempts, String lastError, OffsetDateTime parkedSince,
    boolean effectCommitted) implements ParkedMessage {}
