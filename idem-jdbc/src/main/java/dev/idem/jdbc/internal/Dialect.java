package dev.idem.jdbc.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.Locale;
import org.jooq.SQLDialect;

/**
 * The database idem's SQL is written for, told by the driver (never configured): the one place
 * the engine asks which database it is on. Everything above it is the same code; what differs is
 * the SQL a {@link Dialect} renders (jOOQ's dialect, the times of {@link DbTime}) and the claim
 * statements of {@code internal.claim}. Not an API.
 */
public enum Dialect {
  POSTGRES(SQLDialect.POSTGRES, "PostgreSQL"),
  /**
   * MariaDB 10.11 or later. Its SQL is written to be MySQL 8's as well where the two share it, but
   * MySQL is refused until it is tested.
   */
  MARIADB(SQLDialect.MARIADB, "MariaDB");

  private final SQLDialect jooq;
  private final String product;

  Dialect(SQLDialect jooq, String product) {
    this.jooq = jooq;
    this.product = product;
  }

  /** jOOQ's dialect, for rendering. */
  public SQLDialect jooq() {
    return jooq;
  }

  /** The database's name as users know it, for messages. */
  public String product() {
    return product;
  }

  /**
   * The dialect of the database {@code c} is connected to, from the driver's metadata (no
   * statement is sent).
   *
   * @throws IllegalStateException naming the database if idem does not run on it
   */
  public static Dialect of(Connection c) throws SQLException {
    var meta = c.getMetaData();
    String name = meta.getDatabaseProductName();
    String lower = name == null ? "" : name.toLowerCase(Locale.ROOT);
    if (lower.contains("postgres")) {
      return POSTGRES;
    }
    if (lower.contains("mariadb") || meta.getDatabaseProductVersion().toLowerCase(Locale.ROOT).contains("mariadb")) {
      int major = meta.getDatabaseMajorVersion();
      int minor = meta.getDatabaseMinorVersion();
      if (major < 10 || (major == 10 && minor < 11)) {
        throw new IllegalStateException("idem needs MariaDB 10.11 or later; this DataSource is on MariaDB "
            + meta.getDatabaseProductVersion());
      }
      return MARIADB;
    }
    throw new IllegalStateException("idem runs on PostgreSQL and MariaDB 10.11+; this DataSource is on " + name
        + " " + meta.getDatabaseProductVersion() + (lower.contains("mysql") ? " (MySQL is not yet tested, so refused)" : ""));
  }
}
