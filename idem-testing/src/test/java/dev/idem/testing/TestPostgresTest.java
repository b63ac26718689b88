package dev.idem.testing;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class TestPostgresTest {

  /**
   * A long hint is cut to PostgreSQL's 63 characters; the cut must keep the "idem_" prefix, since
   * a name left starting with a digit is a syntax error in the unquoted CREATE DATABASE.
   */
  @Test
  void aLongHintWithDigitsStillMakesADatabaseNamedAsIdemsOwn() {
    String hint = "ParameterizedRun_" + "2024".repeat(15);
    try (TestDatabase db = TestPostgres.newDatabase(hint)) {
      assertThat(db.name()).hasSizeLessThanOrEqualTo(63).startsWith("idem_parameterizedrun_2024");
      assertThat(db.count("SELECT count(*) FROM pg_database WHERE datname = ?", db.name())).isEqualTo(1);
    }
  }
}
