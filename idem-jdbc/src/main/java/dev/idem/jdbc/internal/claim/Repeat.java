package dev.idem.jdbc.internal.claim;

import dev.idem.jdbc.internal.ClaimSignal;
import dev.idem.jdbc.internal.SqlStates;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * The claim found the key's row: PostgreSQL raised idem's signal (SQLSTATE IDEM1) from the claim
 * sent with its effect, skipped the effect and rolled the round trip back. Carries what the claim
 * saw: for a completed row of the same request within its window, when it completed and the
 * database's now; otherwise nothing, and the row is read in a statement of its own. Or the claim
 * found a statement_timeout in force, and stopped before it wrote: it must be sent again after the
 * statement that turns it off ({@link #needsPreface}).
 */
final class Repeat extends ClaimSignal {
  private static final long serialVersionUID = 1L;

  /** When the first copy completed, or null if the claim saw no completed row of this request. */
  final transient Instant completedAt;
  final transient Duration age;
  /** The claim stopped before it wrote: the session has a statement_timeout, which only a statement before it can lift. */
  final boolean needsPreface;

  private Repeat(Instant completedAt, Duration age, boolean needsPreface) {
    super("repeat");
    this.completedAt = completedAt;
    this.age = age;
    this.needsPreface = needsPreface;
  }

  /** The signal in {@code e}, or null if {@code e} is not idem's signal. */
  static Repeat of(SQLException e) {
    if (!SqlStates.REPEAT.equals(e.getSQLState())) {
      return null;
    }
    ServerErrorMessage m = e instanceof PSQLException p ? p.getServerErrorMessage() : null;
    String detail = m == null ? null : m.getDetail();
    if (detail == null || !detail.startsWith("R ")) {
      return new Repeat(null, null, "S".equals(detail));
    }
    String[] parts = detail.split(" ");
    long completed = ClaimRow.micros(Double.parseDouble(parts[1]));
    long now = ClaimRow.micros(Double.parseDouble(parts[2]));
    return new Repeat(ClaimRow.instant(completed), ClaimRow.duration(Math.max(0, now - completed)), false);
  }
}
