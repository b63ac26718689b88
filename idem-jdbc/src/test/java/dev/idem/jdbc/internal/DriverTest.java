package dev.idem.jdbc.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Reading pgjdbc's version to know whether autosave=always keeps idem's savepoints. */
class DriverTest {
  @Test
  void versionsBefore42710AreOld() {
    assertThat(Driver.olderThan("PostgreSQL JDBC Driver 42.7.8", 42, 7, 10)).isTrue();
    assertThat(Driver.olderThan("PostgreSQL JDBC Driver 42.7.9", 42, 7, 10)).isTrue();
    assertThat(Driver.olderThan("PostgreSQL JDBC Driver 42.6.2", 42, 7, 10)).isTrue();
    assertThat(Driver.olderThan("PostgreSQL JDBC Driver 42.7.10", 42, 7, 10)).isFalse();
    assertThat(Driver.olderThan("PostgreSQL JDBC Driver 42.7.14", 42, 7, 10)).isFalse();
    assertThat(Driver.olderThan("PostgreSQL JDBC Driver 43.0.0", 42, 7, 10)).isFalse();
    assertThat(Driver.olderThan("no version here", 42, 7, 10)).isFalse();
  }
}
