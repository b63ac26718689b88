package dev.idem.examples;

import dev.idem.jdbc.reconcile.EffectTable;
import dev.idem.testing.TestDatabase;
import java.sql.SQLException;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;

/**
 * Where the lab's own tables are, and its SQL where PostgreSQL and MariaDB differ; idem's SQL is
 * idem's business. What each run reads and prints is the same on both.
 *
 * <p>PostgreSQL: the service's tables are in schema {@code shop} and the provider's in schema
 * {@code provider} of the run's database, beside idem's (schema {@code idem}). MariaDB, where a
 * schema is a database: the service's tables are in the run's database with idem's (a service there
 * keeps its tables and idem's in its one database), and the provider, another company, has a
 * database of its own on the same server ({@link PaymentProvider#open}). Times are {@code
 * DATETIME(6)} holding UTC there, written and compared with {@code UTC_TIMESTAMP(6)} (never {@code
 * NOW()}, which is in the session's time zone), and {@code key} is a reserved word, so quoted.
 */
enum LabSql {
  POSTGRESQL(SQLDialect.POSTGRES, "shop.", "provider."),
  MARIADB(SQLDialect.MARIADB, "", "");

  /** MariaDB's ER_DUP_ENTRY. */
  private static final int DUPLICATE_KEY = 1062;

  private final SQLDialect dialect;
  private final String shopPrefix;
  private final String providerPrefix;

  LabSql(SQLDialect dialect, String shopPrefix, String providerPrefix) {
    this.dialect = dialect;
    this.shopPrefix = shopPrefix;
    this.providerPrefix = providerPrefix;
  }

  static LabSql of(TestDatabase db) {
    return of(db.vendor());
  }

  static LabSql of(TestDatabase.Vendor vendor) {
    return vendor == TestDatabase.Vendor.MARIADB ? MARIADB : POSTGRESQL;
  }

  /** The jOOQ dialect the lab's plain SQL is sent with. */
  SQLDialect dialect() {
    return dialect;
  }

  /** A table of the payments service's own, as its SQL names it: {@code shop.payments}, or {@code payments}. */
  String shop(String table) {
    return shopPrefix + table;
  }

  /** A table of the provider's, as the provider's SQL names it: {@code provider.charges}, or {@code charges}. */
  String provider(String table) {
    return providerPrefix + table;
  }

  /**
   * What reconciliation checks after every run: one order is one intent, so a second payment row
   * for an order is the double charge. No {@code withScope}: the executor's keys (scope {@code
   * payments}) are the app's {@code Idempotency-Key} values, one per tap or per fresh-key retry,
   * never order ids, so "keys with no effect" would compare taps with orders and report every key.
   * The provider's charges are compared by their {@code payment_ref}, the payment's {@code id}.
   */
  EffectTable paymentsByOrder() {
    // The provider knows the payment (the worker sends its id as payment_ref): a charge's intent is
    // the order of the payment row it names, so two charges for one order are a break whatever keys they carried.
    EffectTable payments = EffectTable.of("payments", "order_id").withReference("id");
    return this == POSTGRESQL ? payments.inSchema("shop") : payments; // MariaDB: the connection's database
  }

  /** The service's tables: its payments and the receipt emails it "sends". */
  List<String> shopTables() {
    if (this == POSTGRESQL) {
      return List.of(
          "CREATE SCHEMA IF NOT EXISTS shop",
          "CREATE TABLE IF NOT EXISTS shop.payments ("
              + " id text PRIMARY KEY, order_id text NOT NULL, amount_cents integer NOT NULL,"
              + " idempotency_key text NOT NULL, status text NOT NULL DEFAULT 'PENDING', charge_id text,"
              + " created_at timestamptz NOT NULL DEFAULT now())",
          "CREATE TABLE IF NOT EXISTS shop.receipt_emails ("
              + " id bigserial PRIMARY KEY, payment_ref text NOT NULL, charge_id text NOT NULL, event_id text NOT NULL,"
              + " sent_at timestamptz NOT NULL DEFAULT now())");
    }
    // Ids, orders and keys compared as PostgreSQL compares text, exactly (utf8mb4_nopad_bin): MariaDB's
    // default collations fold case, and utf8mb4_bin pads, so 'a' and 'a ' would be one key.
    return List.of(
        "CREATE TABLE IF NOT EXISTS payments ("
            + " id VARCHAR(64) PRIMARY KEY, order_id VARCHAR(255) NOT NULL, amount_cents INT NOT NULL,"
            + " idempotency_key VARCHAR(512) NOT NULL, status VARCHAR(32) NOT NULL DEFAULT 'PENDING', charge_id VARCHAR(64),"
            + " created_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)"
            + ") ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
        "CREATE TABLE IF NOT EXISTS receipt_emails ("
            + " id BIGINT AUTO_INCREMENT PRIMARY KEY, payment_ref VARCHAR(64) NOT NULL, charge_id VARCHAR(64) NOT NULL,"
            + " event_id VARCHAR(64) NOT NULL, sent_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)"
            + ") ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin");
  }

  /** The provider's tables: its charges, the idempotency keys it remembers 24 hours, and its webhook events. */
  List<String> providerTables() {
    if (this == POSTGRESQL) {
      return List.of(
          "CREATE SCHEMA IF NOT EXISTS provider",
          "CREATE TABLE IF NOT EXISTS provider.charges ("
              + " id text PRIMARY KEY, amount_cents integer NOT NULL, payment_ref text NOT NULL,"
              + " idempotency_key text, created_at timestamptz NOT NULL DEFAULT now())",
          "CREATE TABLE IF NOT EXISTS provider.idempotency_keys ("
              + " key text PRIMARY KEY, request text NOT NULL, charge_id text NOT NULL,"
              + " created_at timestamptz NOT NULL DEFAULT now())",
          "CREATE TABLE IF NOT EXISTS provider.events ("
              + " id text PRIMARY KEY, type text NOT NULL, charge_id text NOT NULL, payment_ref text NOT NULL,"
              + " deliveries integer NOT NULL DEFAULT 0, created_at timestamptz NOT NULL DEFAULT now())");
    }
    return List.of(
        "CREATE TABLE IF NOT EXISTS charges ("
            + " id VARCHAR(64) PRIMARY KEY, amount_cents INT NOT NULL, payment_ref VARCHAR(64) NOT NULL,"
            + " idempotency_key VARCHAR(512), created_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)"
            + ") ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
        "CREATE TABLE IF NOT EXISTS idempotency_keys ("
            + " `key` VARCHAR(512) PRIMARY KEY, request TEXT NOT NULL, charge_id VARCHAR(64) NOT NULL,"
            + " created_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)"
            + ") ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
        "CREATE TABLE IF NOT EXISTS events ("
            + " id VARCHAR(64) PRIMARY KEY, type VARCHAR(64) NOT NULL, charge_id VARCHAR(64) NOT NULL,"
            + " payment_ref VARCHAR(64) NOT NULL, deliveries INT NOT NULL DEFAULT 0,"
            + " created_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)"
            + ") ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin");
  }

  /** Deletes key {@code ?} if it is at least {@code ?} hours old by the database's clock ({@link #interval}): the provider forgot it. */
  String forgetKeyOlderThan() {
    return this == POSTGRESQL
        ? "DELETE FROM provider.idempotency_keys WHERE key = ? AND created_at <= now() - ?::interval"
        : "DELETE FROM idempotency_keys WHERE `key` = ? AND created_at <= UTC_TIMESTAMP(6) - INTERVAL ? HOUR";
  }

  /**
   * An interval as this database's statements here bind it: PostgreSQL casts text ({@code '24
   * hours'::interval}); MariaDB's {@code INTERVAL ? HOUR} takes the number, the unit in the SQL.
   */
  Object interval(long amount, String unit) {
    return this == POSTGRESQL ? amount + " " + unit : amount;
  }

  /**
   * Records the key with its request and charge id, unless the key is there already: 1 if this
   * request claimed the key, 0 if another had (waiting, as on PostgreSQL, for a competing request's
   * transaction to end). MariaDB has no ON CONFLICT DO NOTHING, and INSERT IGNORE would also turn a
   * value too long for its column into a warning and cut it: the duplicate is told by its error,
   * which rolls back this statement only.
   */
  int claimKey(DSLContext sql, String key, String request, String chargeId) {
    if (this == POSTGRESQL) {
      return sql.execute("INSERT INTO provider.idempotency_keys (key, request, charge_id) VALUES (?, ?, ?)"
          + " ON CONFLICT (key) DO NOTHING", key, request, chargeId);
    }
    try {
      return sql.execute("INSERT INTO idempotency_keys (`key`, request, charge_id) VALUES (?, ?, ?)", key, request, chargeId);
    } catch (DataAccessException e) {
      SQLException cause = e.getCause(SQLException.class);
      if (cause != null && cause.getErrorCode() == DUPLICATE_KEY) {
        return 0;
      }
      throw e;
    }
  }

  /** The request and charge id key {@code ?} was first used with. */
  String readKey() {
    return this == POSTGRESQL
        ? "SELECT request, charge_id FROM provider.idempotency_keys WHERE key = ?"
        : "SELECT request, charge_id FROM idempotency_keys WHERE `key` = ?";
  }

  /** Makes every key the provider remembers {@code ?} minutes older ({@link #interval}). */
  String ageKeys() {
    return this == POSTGRESQL
        ? "UPDATE provider.idempotency_keys SET created_at = created_at - ?::interval"
        : "UPDATE idempotency_keys SET created_at = created_at - INTERVAL ? MINUTE";
  }

  // ---- the tours' tables (Tours) -------------------------------------------------------------

  /** A shipment's status and version, which conditional transitions move (tour shipment). */
  List<String> shipmentsTable() {
    return this == POSTGRESQL
        ? List.of("CREATE SCHEMA shop",
            "CREATE TABLE shop.shipments (id text PRIMARY KEY, status text NOT NULL, version integer NOT NULL DEFAULT 0)")
        : List.of("CREATE TABLE shipments (id VARCHAR(64) PRIMARY KEY, status VARCHAR(32) NOT NULL, version INT NOT NULL DEFAULT 0)"
            + " ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin");
  }

  /** One row per nightly invoice run (tour scheduler). */
  String invoiceRunsTable() {
    return this == POSTGRESQL
        ? "CREATE TABLE invoice_runs (id bigserial PRIMARY KEY, job text NOT NULL, run_key text NOT NULL,"
            + " started_at timestamptz NOT NULL DEFAULT clock_timestamp())"
        : "CREATE TABLE invoice_runs (id BIGINT AUTO_INCREMENT PRIMARY KEY, job VARCHAR(64) NOT NULL, run_key VARCHAR(512) NOT NULL,"
            + " started_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)) ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin";
  }

  /** One row per batch a lease holder wrote, with its fencing token (tour zombie). */
  String ledgerBatchesTable() {
    return this == POSTGRESQL
        ? "CREATE TABLE ledger_batches (id bigserial PRIMARY KEY, holder text NOT NULL, token bigint NOT NULL)"
        : "CREATE TABLE ledger_batches (id BIGINT AUTO_INCREMENT PRIMARY KEY, holder VARCHAR(64) NOT NULL, token BIGINT NOT NULL)"
            + " ENGINE=InnoDB CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin";
  }
}
