package dev.idem.jdbc.internal;

import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.jooq.impl.DSL;

/**
 * "An inbox of this schema received this outbox message": the test of a dead letter whose effect
 * already committed, for the relay's park path and the operator's list. An inbox row commits in
 * the consumer's transaction with its effect, so a row holding the message's id (its text, as
 * {@code UUID.toString} writes it, the form idem's publishers send) means that consumer's effect
 * of the message committed. Any consumer counts: outbox ids are UUIDv7s minted by idem, so no other
 * message has the id.
 *
 * <p>The inbox's key is (consumer, message id), so a look-up by id alone would scan it: the
 * condition first lists the consumers by a walk of that index (PostgreSQL: a recursive
 * {@code min(consumer) > previous}, one index probe per consumer; MariaDB answers {@code select
 * distinct consumer} the same way, a loose index scan), then probes (consumer, id) per consumer.
 * Not an API.
 */
public final class InboxReceived {
  private static final Table<?> INBOX = DSL.table(DSL.name("idem", "idem_inbox"));

  private InboxReceived() {}

  /**
   * True if some inbox row's message id is {@code id}'s text. {@code id} is an outbox id column
   * (PostgreSQL's uuid, MariaDB's CHAR(36)) or a bound parameter of the same type.
   */
  public static Condition of(DSLContext d, boolean mariadb, Field<?> id) {
    return DSL.condition("exists (select 1 from " + receivers(d, mariadb) + ")", text(mariadb, id));
  }

  /**
   * The statement that names, for one outbox id bound as {@link OutboxTable#setId} binds it, the
   * first consumer (by name) whose inbox received it; no row if none did.
   */
  public static String firstConsumerSql(DSLContext d, boolean mariadb) {
    Field<?> id = mariadb ? DSL.val((String) null, OutboxTable.ID_TEXT) : DSL.val((java.util.UUID) null, OutboxTable.ID);
    return d.render(DSL.resultQuery("select idem_r.consumer from " + receivers(d, mariadb) + " order by idem_r.consumer limit 1",
        text(mariadb, id)));
  }

  private static Field<?> text(boolean mariadb, Field<?> id) {
    return mariadb ? id : DSL.field("cast({0} as text)", String.class, id);
  }

  /** The consumers (walked as the class says) joined with their inbox row of the id {@code {0}}. */
  private static String receivers(DSLContext d, boolean mariadb) {
    String inbox = d.render(INBOX);
    String consumers = mariadb
        ? "(select distinct consumer from " + inbox + ")"
        : "(with recursive c(consumer) as (select min(consumer) from " + inbox
            + " union all select (select min(i.consumer) from " + inbox + " i where i.consumer > c.consumer)"
            + " from c where c.consumer is not null) select consumer from c where consumer is not null)";
    return consumers + " idem_cs join " + inbox + " idem_r on idem_r.consumer = idem_cs.consumer and idem_r.message_id = {0}";
  }
}
