package dev.idem.spring;

import java.sql.SQLException;
import javax.sql.DataSource;
import org.springframework.dao.DataAccessException;
import org.springframework.dao.support.PersistenceExceptionTranslator;
import org.springframework.jdbc.support.SQLErrorCodeSQLExceptionTranslator;
import org.springframework.jdbc.support.SQLExceptionTranslator;

/**
 * Translates the data-access errors idem throws (jOOQ's {@code DataAccessException} around the
 * driver's {@link SQLException}) into Spring's {@link DataAccessException} hierarchy, as Spring
 * translates JdbcTemplate's: a lost connection becomes a {@code DataAccessResourceFailureException},
 * a serialization failure a {@code PessimisticLockingFailureException}, and so on.
 *
 * <p>Spring applies it to exceptions thrown from {@code @Repository} beans (its
 * PersistenceExceptionTranslationPostProcessor, which Spring Boot registers); {@link #translate} can
 * be called directly. idem's own rule exceptions ({@code KeyReuseException}, {@code
 * StaleFenceException}, ...) are not data-access errors and are left as they are.
 */
public final class IdemExceptionTranslator implements PersistenceExceptionTranslator {
  private final SQLExceptionTranslator translator;

  /** Translates with the error codes of {@code dataSource}'s database. */
  public IdemExceptionTranslator(DataSource dataSource) {
    this.translator = new SQLErrorCodeSQLExceptionTranslator(dataSource);
  }

  @Override
  public DataAccessException translateExceptionIfPossible(RuntimeException ex) {
    if (!(ex instanceof org.jooq.exception.DataAccessException)) {
      return null;
    }
    for (Throwable t = ex.getCause(); t != null; t = t.getCause()) {
      if (t instanceof SQLException sql) {
        return translator.translate("idem", null, sql);
      }
    }
    return null;
  }

  /** {@code ex} translated if it is one of idem's data-access errors, else {@code ex} itself. */
  public RuntimeException translate(RuntimeException ex) {
    DataAccessException translated = translateExceptionIfPossible(ex);
    return translated != null ? translated : ex;
  }
}
