package dev.idem.jdbc.ops;

import java.time.Duration;

/** The one implementation of {@link UnknownOutcomes}: a value, built by idem only. */
record UnknownOutcomesValue(long count, Duration oldest) implements UnknownOutcomes {}
