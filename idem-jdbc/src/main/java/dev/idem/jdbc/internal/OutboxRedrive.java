package dev.idem.jdbc.internal;

import static dev.idem.jdbc.internal.OutboxTable.*;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.UUID;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.UpdateSetMoreStep;
import org.jooq.impl.DSL;

/**
 * The re-drive of parked outbox messages, the operator's view's ({@code Operations.redrive*}), the one
 * way to administer the outbox: a parked row
 * becomes pending again, due now (database clock), attempts reset, id unchanged. Rendered once per
 * context. Not an API.
 */
public final class OutboxRedrive {
  private final String byId;
  private final String byTopic;
  private final String all;
  /** On MariaDB the id is bound as its text (see {@link OutboxTable#setId}). */
  private final boolean mariadb;

  public OutboxRedrive(Context context) {
    DSLContext d = context.dsl();
    this.mariadb = context.mariadb();
    Condition parked = STATUS.eq(DSL.inline(PARKED));
    Condition id = mariadb ? ID_TEXT.eq(DSL.val((String) null, ID_TEXT)) : ID.eq(DSL.val((UUID) null, ID));
    this.byId = d.render(update(d).where(id).and(parked));
    this.byTopic = d.render(update(d).where(TOPIC.eq(DSL.val((String) null, TOPIC))).and(parked));
    this.all = d.render(update(d).where(parked));
  }

  /** Pending again, due now, attempts reset; a new statement each call (jOOQ's builders are mutable). */
  private static UpdateSetMoreStep<?> update(DSLContext d) {
    return d.update(T).set(STATUS, DSL.inline(PENDING)).set(ATTEMPTS, DSL.inline(0)).set(NEXT_ATTEMPT_AT, DbTime.clock());
  }

  /** Re-drives the parked message {@code id}; returns the rows changed (0 or 1). */
  public int byId(Connection c, UUID id) throws SQLException {
    return run(c, byId, mariadb ? id.toString() : id);
  }

  /** Re-drives every parked message of {@code topic}; returns how many. */
  public int byTopic(Connection c, String topic) throws SQLException {
    return run(c, byTopic, topic);
  }

  /** Re-drives every parked message; returns how many. */
  public int all(Connection c) throws SQLException {
    return run(c, all, null);
  }

  private static int run(Connection c, String sql, Object param) throws SQLException {
    try (PreparedStatement ps = c.prepareStatement(sql)) {
      if (param != null) {
        ps.setObject(1, param);
      }
      return ps.executeUpdate();
    }
  }
}
