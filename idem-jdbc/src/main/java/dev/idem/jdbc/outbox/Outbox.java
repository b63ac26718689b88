package dev.idem.jdbc.outbox;

import static dev.idem.jdbc.outbox.OutboxTable.*;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.Tx;
import dev.idem.jdbc.internal.Expiry;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.Map;
import java.util.UUID;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.UpdateSetMoreStep;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * The transactional outbox: {@link #enqueue} writes a message in the caller's own transaction, so
 * the message exists if and only if the caller's business change commits. A {@link Relay} sends it
 * afterwards.
 *
 * <p>Guarantees: the id is minted at enqueue (a time-ordered UUIDv7), never at send time, so every
 * send of the message carries the same id. A message is never dropped: it stays pending, sent (kept
 * for the relay's retention) or parked after too many failed attempts, where {@link #redrive} sends
 * it again.
 *
 * <p>Does not guarantee: exactly-once delivery. The relay is at least once; receivers must absorb
 * copies by the message id (an {@link dev.idem.jdbc.inbox.Inbox} does).
 *
 * <p>Thread-safe and stateless beyond its {@link Idem}.
 */
public final class Outbox {
  private final Idem idem;
  private final boolean notifying;
  private final String insertSql;
  private final String redriveSql;
  private final String redriveAllSql;

  private Outbox(Idem idem, boolean notifying) {
    this.idem = idem;
    this.notifying = notifying;
    DSLContext d = idem.dsl();
    // Rendered once: enqueue sits on the caller's hot path, inside their transaction.
    var insert = d.insertInto(T, ID, TOPIC, AGGREGATE_KEY, PAYLOAD, HEADER_NAMES, HEADER_VALUES)
        .values(DSL.val((UUID) null, ID), DSL.val((String) null, TOPIC), DSL.val((String) null, AGGREGATE_KEY),
            DSL.val((byte[]) null, PAYLOAD), DSL.val((String[]) null, HEADER_NAMES), DSL.val((String[]) null, HEADER_VALUES));
    // The notification rides on the insert itself (no extra round trip); PostgreSQL delivers it at
    // commit, once per transaction and channel however many messages were enqueued.
    this.insertSql = notifying
        ? d.render(insert.returningResult(DSL.function("pg_notify", Object.class, DSL.inline(channel(idem)), DSL.inline(""))))
        : d.render(insert);
    Condition parked = STATUS.eq(DSL.inline(PARKED));
    this.redriveSql = d.render(redrive(d).where(ID.eq(DSL.val((UUID) null, ID))).and(parked));
    this.redriveAllSql = d.render(redrive(d).where(parked));
  }

  /** Pending again, due now, attempts reset; a new statement each call (jOOQ's builders are mutable). */
  private static UpdateSetMoreStep<?> redrive(DSLContext d) {
    return d.update(T).set(STATUS, DSL.inline(PENDING)).set(ATTEMPTS, DSL.inline(0)).set(NEXT_ATTEMPT_AT, Expiry.dbNow());
  }

  /** The NOTIFY channel of {@code idem}'s outbox: one per schema. */
  static String channel(Idem idem) {
    return idem.schema() + ".idem_outbox";
  }

  /** The outbox of {@code idem}. Prefer {@link Idem#outbox()}. */
  public static Outbox of(Idem idem) {
    if (idem == null) {
      throw new IllegalArgumentException("idem must not be null");
    }
    return new Outbox(idem, false);
  }

  /**
   * This outbox, made to wake listening relays ({@link Relay.Builder#listen}) when an enqueuing
   * transaction commits, with a PostgreSQL {@code NOTIFY}. Costs: the insert also calls {@code
   * pg_notify}, and PostgreSQL serializes the commits of notifying transactions of a database (a
   * lock held briefly at commit), which caps the commit rate of enqueuers under heavy load. Without
   * it, relays find new messages at their next poll.
   */
  public Outbox notifying() {
    return notifying ? this : new Outbox(idem, true);
  }

  /**
   * Writes {@code message} in the transaction open on {@code callerTx} and returns its new id. It
   * commits or rolls back with the caller's transaction; nothing is sent before that commits. (On
   * a connection in auto-commit mode it commits at once, alone.)
   */
  public UUID enqueue(Connection callerTx, NewMessage message) {
    if (callerTx == null) {
      throw new IllegalArgumentException("callerTx must not be null");
    }
    if (message == null) {
      throw new IllegalArgumentException("message must not be null");
    }
    UUID id = UuidV7.next();
    Map<String, String> headers = message.headers();
    String[] names = headers.keySet().toArray(new String[0]);
    String[] values = headers.values().toArray(new String[0]);
    try (PreparedStatement ps = callerTx.prepareStatement(insertSql)) {
      ps.setObject(1, id);
      ps.setString(2, message.topic());
      ps.setString(3, message.aggregateKey());
      ps.setBytes(4, message.payloadUnsafe());
      ps.setArray(5, callerTx.createArrayOf("text", names));
      ps.setArray(6, callerTx.createArrayOf("text", values));
      ps.execute();
    } catch (SQLException e) {
      throw new DataAccessException("could not enqueue " + message + ": " + e.getMessage(), e);
    }
    return id;
  }

  /** {@link #enqueue(Connection, NewMessage)} on the connection of a jOOQ context. */
  public UUID enqueue(DSLContext callerTx, NewMessage message) {
    if (callerTx == null) {
      throw new IllegalArgumentException("callerTx must not be null");
    }
    if (message == null) {
      throw new IllegalArgumentException("message must not be null");
    }
    return callerTx.connectionResult(c -> enqueue(c, message));
  }

  /** {@link #enqueue(Connection, NewMessage)} in an idem transaction. */
  public UUID enqueue(Tx callerTx, NewMessage message) {
    if (callerTx == null) {
      throw new IllegalArgumentException("callerTx must not be null");
    }
    return enqueue(callerTx.connection(), message);
  }

  /**
   * Sends a parked message again: it becomes pending, due now, with its attempts reset. Its id is
   * unchanged.
   *
   * @return true if {@code id} was parked and is now pending; false if no parked message has it
   */
  public boolean redrive(UUID id) {
    if (id == null) {
      throw new IllegalArgumentException("id must not be null");
    }
    return idem.inTransaction(tx -> {
      try (PreparedStatement ps = tx.connection().prepareStatement(redriveSql)) {
        ps.setObject(1, id);
        return ps.executeUpdate() == 1;
      } catch (SQLException e) {
        throw new DataAccessException("could not re-drive " + id + ": " + e.getMessage(), e);
      }
    });
  }

  /**
   * {@link #redrive(UUID)} for every parked message, in one statement (fix the cause first: they
   * are tried again at once).
   *
   * @return how many were parked and are now pending
   */
  public int redriveAll() {
    return idem.inTransaction(tx -> {
      try (PreparedStatement ps = tx.connection().prepareStatement(redriveAllSql)) {
        return ps.executeUpdate();
      } catch (SQLException e) {
        throw new DataAccessException("could not re-drive the parked messages: " + e.getMessage(), e);
      }
    });
  }
}
