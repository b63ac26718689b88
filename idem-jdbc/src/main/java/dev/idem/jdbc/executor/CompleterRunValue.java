package dev.idem.jdbc.executor;

/** The one implementation of {@link CompleterRun}: a value, built by idem only. */
record CompleterRunValue(boolean ran, int finished, int released, int stillUnknown, int skipped) implements CompleterRun {}
