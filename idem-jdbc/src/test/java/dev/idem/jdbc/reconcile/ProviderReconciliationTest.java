package dev.idem.jdbc.reconcile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Reconciliation with the provider's side: a fake provider keeps its charges in a table of its
 * own (the database's clock stamps them), the service pays through the executor's external effect
 * and writes its payment rows; breaks are planted at the provider (a second charge for one intent
 * sent with a fresh key, charges that carry no key of ours, a completed call the provider never
 * charged) and each is found, counted in the database, and recorded. In order: clean first.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@IdemTest(poolSize = 4, sql = "CREATE TABLE payments (id varchar(64) PRIMARY KEY, order_key varchar(255), amount int NOT NULL)")
class ProviderReconciliationTest {
  static TestDatabase db;
  static DataSource ds;
  static boolean maria;
  static Idem idem;
  static IdempotentExecutor executor;
  static Reconciliation reconciliation;
  static final EffectTable PAYMENTS = EffectTable.of("payments", "order_key").withScope("shop");
  static final Duration HOUR = Duration.ofHours(1);

  @BeforeAll
  static void start(TestDatabase database, DataSource pool) {
    db = database;
    ds = pool;
    maria = db.vendor() == TestDatabase.Vendor.MARIADB;
    db.execute(maria
        ? "CREATE TABLE provider_charges (id varchar(64) PRIMARY KEY, call_key varchar(512), reference varchar(255),"
            + " amount bigint NOT NULL, at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6))"
        : "CREATE TABLE provider_charges (id text PRIMARY KEY, call_key text, reference text, amount bigint NOT NULL,"
            + " at timestamptz NOT NULL DEFAULT clock_timestamp())");
    idem = Idem.builder(ds).build();
    executor = idem.executor().build();
    reconciliation = idem.reconciliation();
  }

  /** The provider's charge: one row in its table. */
  static void charge(String callKey, String reference, long amount) {
    db.execute("INSERT INTO provider_charges (id, call_key, reference, amount) VALUES ('ch_" + UUID.randomUUID() + "', "
        + (callKey == null ? "NULL" : "'" + callKey + "'") + ", " + (reference == null ? "NULL" : "'" + reference + "'")
        + ", " + amount + ")");
  }

  /** The provider's listing API: its charges in [from, to), read from its table. */
  static final ProviderRecords PROVIDER = (from, to) -> {
    List<ProviderEffect> out = new ArrayList<>();
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement("SELECT id, call_key, reference, amount, at FROM provider_charges"
            + " WHERE at >= ? AND at < ? ORDER BY at")) {
      ps.setObject(1, maria ? from.withOffsetSameInstant(ZoneOffset.UTC).toLocalDateTime() : from);
      ps.setObject(2, maria ? to.withOffsetSameInstant(ZoneOffset.UTC).toLocalDateTime() : to);
      try (ResultSet rs = ps.executeQuery()) {
        while (rs.next()) {
          OffsetDateTime at = maria ? rs.getObject(5, java.time.LocalDateTime.class).atOffset(ZoneOffset.UTC)
              : rs.getObject(5, OffsetDateTime.class);
          out.add(new ProviderEffect(rs.getString(1), rs.getString(2), rs.getString(3), rs.getLong(4), at));
        }
      }
    }
    return out;
  };

  /** One payment of {@code order}: the external call (the provider charges by its call key unless {@code charged} is false), then the service's row. */
  static void pay(String order, boolean charged) throws Exception {
    executor.executeExternal(IdempotencyKey.of("shop", order), Fingerprint.of(order), Codec.utf8(), attempt -> {
      if (charged) {
        charge(attempt.callKey().value(), order, 10);
      }
      return "paid";
    });
    try (Connection c = ds.getConnection();
        PreparedStatement ps = c.prepareStatement("INSERT INTO payments (id, order_key, amount) VALUES (?, ?, 10)")) {
      ps.setString(1, UUID.randomUUID().toString());
      ps.setString(2, order);
      ps.executeUpdate();
    }
  }

  @Test
  @Order(1)
  void oneChargePerPaidIntentIsClean() throws Exception {
    pay("o1", true);
    pay("o2", true);
    Findings f = reconciliation.check(PAYMENTS, PROVIDER, HOUR);
    ProviderFindings p = f.provider().orElseThrow();
    assertThat(p.clean()).as(p.toString()).isTrue();
    assertThat(f.clean()).isTrue();
    assertThat(p.effects()).isEqualTo(2).isEqualTo(db.count("SELECT count(*) FROM provider_charges"));
    assertThat(p.to()).isBeforeOrEqualTo(f.checkedAt());
    assertThat(Duration.between(p.from(), p.to())).isEqualTo(HOUR);
    assertThat(reconciliation.check(PAYMENTS).provider()).as("no provider given").isEmpty();
  }

  @Test
  @Order(2)
  void everyPlantedProviderBreakIsFoundAndRecorded() throws Exception {
    // a double charge: the intent's call went out with its call key, then a retry with a fresh key
    pay("o3", true);
    charge("retry-" + UUID.randomUUID(), "o3", 10);
    // charges that belong to no intent: no key and an unknown reference, a key idem never made
    charge(null, "o-nobody", 25);
    charge("someone-elses-key", null, 30);
    // a completed call the provider never charged
    pay("o4", false);

    // the database: two charges for o3, one payment row for it
    assertThat(db.count("SELECT count(*) FROM provider_charges WHERE reference = 'o3'")).isEqualTo(2);
    assertThat(db.count("SELECT count(*) FROM payments WHERE order_key = 'o3'")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM provider_charges WHERE call_key = ?",
        dev.idem.key.Keys.child(IdempotencyKey.of("shop", "o4"), "external").value())).isZero();

    Findings f = reconciliation.check(PAYMENTS, PROVIDER, HOUR);
    assertThat(f.duplicates()).as("the service has one payment per order").isEmpty();
    assertThat(f.clean()).isFalse();
    ProviderFindings p = f.provider().orElseThrow();
    assertThat(p.effects()).isEqualTo(6);
    assertThat(p.duplicateCount()).isEqualTo(1);
    assertThat(p.duplicates()).singleElement().satisfies(d -> {
      assertThat(d.intent()).isEqualTo("o3");
      assertThat(d.effects()).hasSize(2).extracting(ProviderEffect::reference).containsOnly("o3");
      assertThat(d.amount()).isEqualTo(20);
    });
    assertThat(p.effectsWithoutKeyCount()).isEqualTo(2);
    assertThat(p.effectsWithoutKey()).extracting(ProviderEffect::amount).containsExactlyInAnyOrder(25L, 30L);
    assertThat(p.keysUnseenCount()).isEqualTo(1);
    assertThat(p.keysUnseen()).singleElement().satisfies(k -> {
      assertThat(k.key()).isEqualTo(IdempotencyKey.of("shop", "o4"));
      assertThat(k.callKey()).isEqualTo(dev.idem.key.Keys.child(k.key(), "external").value());
    });

    assertThat(reconciliation.record(f)).isEqualTo(4);
    assertThat(db.count("SELECT count(*) FROM idem_breaks WHERE kind = 'PROVIDER_DUPLICATE' AND " + (maria ? "`key`" : "key")
        + " = 'o3'")).isEqualTo(1);
    assertThat(db.count("SELECT count(*) FROM idem_breaks WHERE kind = 'PROVIDER_EFFECT_WITHOUT_KEY'")).isEqualTo(2);
    assertThat(db.count("SELECT count(*) FROM idem_breaks WHERE kind = 'KEY_WITHOUT_PROVIDER_EFFECT'")).isEqualTo(1);
  }

  @Test
  @Order(3)
  void aReferenceColumnGivesTheProviderEffectTheIntentOfItsRow() throws Exception {
    // the provider knows the payment's id, the intent is the order: two payments of o5, each charged once
    for (String payment : List.of("pay-a", "pay-b")) {
      db.execute("INSERT INTO payments (id, order_key, amount) VALUES ('" + payment + "', 'o5', 10)");
      charge("fresh-" + UUID.randomUUID(), payment, 10);
    }
    ProviderFindings byOrder = reconciliation.check(PAYMENTS.withReference("id"), PROVIDER, HOUR).provider().orElseThrow();
    assertThat(byOrder.duplicates()).extracting(ProviderFindings.DoubleEffect::intent).contains("o5");
    assertThat(byOrder.duplicates()).filteredOn(d -> d.intent().equals("o5")).singleElement()
        .satisfies(d -> assertThat(d.effects()).extracting(ProviderEffect::reference).containsExactlyInAnyOrder("pay-a", "pay-b"));
  }

  @Test
  @Order(4)
  void badInputIsRefusedAndAFailingProviderNamed() {
    assertThatThrownBy(() -> reconciliation.check(PAYMENTS, PROVIDER, Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("range must be positive");
    assertThatThrownBy(() -> reconciliation.check(PAYMENTS, null, HOUR))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("provider must not be null");
    assertThatThrownBy(() -> reconciliation.check(PAYMENTS, (from, to) -> {
      throw new SQLException("provider API down");
    }, HOUR)).isInstanceOf(IllegalStateException.class).hasMessageContaining("could not read the provider's records")
        .hasMessageContaining("provider API down");
    assertThatThrownBy(() -> new ProviderEffect("", null, null, 1, OffsetDateTime.now()))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("provider's id");
  }

  /**
   * Keys of the same value in another scope (a refund of the order, through its own executor call)
   * are another intent: with the table's scope, the refund's provider effect is not counted as a
   * second charge of the order.
   */
  @Test
  @Order(5)
  void aKeyOfTheSameValueInAnotherScopeIsAnotherIntent() throws Exception {
    pay("o5", true);
    IdempotencyKey refund = IdempotencyKey.of("refunds", "o5");
    executor.executeExternal(refund, Fingerprint.of("o5"), Codec.utf8(), attempt -> {
      charge(attempt.callKey().value(), null, -10);
      return "refunded";
    });
    assertThat(db.count("SELECT count(*) FROM idem_keys k WHERE k.key = 'o5'")).as("one key per scope").isEqualTo(2);

    ProviderFindings p = reconciliation.check(PAYMENTS, PROVIDER, HOUR).provider().orElseThrow();
    assertThat(p.duplicates()).extracting(ProviderFindings.DoubleEffect::intent).doesNotContain("o5");
    assertThat(p.effectsWithoutKey()).extracting(ProviderEffect::callKey)
        .contains(dev.idem.key.Keys.child(refund, "external").value()); // not this table's scope's
  }
}
