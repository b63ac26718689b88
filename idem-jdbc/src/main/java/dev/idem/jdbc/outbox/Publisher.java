package dev.idem.jdbc.outbox;

/** STUB: replaced by the issue that builds it. */
public interface Publisher {}
