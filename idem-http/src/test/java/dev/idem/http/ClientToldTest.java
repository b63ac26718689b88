package dev.idem.http;

import static dev.idem.http.HttpFixture.json;
import static dev.idem.http.HttpFixture.payment;
import static org.assertj.core.api.Assertions.assertThat;

import java.net.URI;
import java.net.http.HttpResponse;
import java.time.Instant;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What the client is told, over real HTTP: when its key expires (the key row's expiry, from the
 * database clock) on the first answer and on every replay, and problem types that are the
 * documented URIs.
 */
class ClientToldTest extends AbstractHttpTest {
  URI payments;

  @BeforeAll
  void serve() throws Exception {
    payments = f.serve(b -> b);
  }

  /** The key row's expires_at in whole epoch seconds, rounded down, read from the database. */
  long rowExpiry(String key) {
    return f.db.count(HttpFixture.mariadb(f.db)
        ? "SELECT timestampdiff(second, '1970-01-01 00:00:00', expires_at) FROM idem_keys WHERE scope = 'anonymous' AND idem_keys.key = ?"
        : "SELECT floor(date_part('epoch', expires_at))::bigint FROM idem_keys WHERE scope = 'anonymous' AND key = ?", key);
  }

  static long headerExpiry(HttpResponse<String> r) {
    String value = r.headers().firstValue("Idempotency-Key-Expires").orElseThrow();
    return java.time.format.DateTimeFormatter.RFC_1123_DATE_TIME.parse(value, Instant::from).getEpochSecond();
  }

  @Test
  void theFirstAnswerAndEveryReplayCarryTheKeyRowsExpiry() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> first = post(payments, payment(order, 4000, "ok"), key);
    HttpResponse<String> second = post(payments, payment(order, 4000, "ok"), key);
    HttpResponse<String> third = post(payments, payment(order, 4000, "ok"), key);

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(second.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(third.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(f.keyRows(key)).isEqualTo(1);
    assertThat(f.payments(order)).isEqualTo(1);
    long row = rowExpiry(key);
    assertThat(headerExpiry(first)).isEqualTo(row);
    assertThat(headerExpiry(second)).isEqualTo(row);
    assertThat(headerExpiry(third)).isEqualTo(row);
    // an IMF-fixdate, as Date and Expires are sent
    assertThat(first.headers().firstValue("Idempotency-Key-Expires").orElseThrow()).endsWith(" GMT");
  }

  @Test
  void aResponseThatIsNotStoredCarriesNoExpiry() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> r = post(payments, payment(order, 4000, "status-503"), key);

    assertThat(r.statusCode()).isEqualTo(503);
    assertThat(r.headers().firstValue("Idempotency-Key-Expires")).isEmpty();
    assertThat(f.keyRows(key)).isZero();
  }

  @Test
  void problemTypesAreTheDocumentedUris() throws Exception {
    String order = HttpFixture.unique("o");
    String key = HttpFixture.unique("k");
    HttpResponse<String> missing = f.post(payments, payment(order, 4000, "ok"));
    HttpResponse<String> malformed = post(payments, payment(order, 4000, "ok"), "\"unterminated");
    HttpResponse<String> first = post(payments, payment(order, 4000, "ok"), key);
    HttpResponse<String> reused = post(payments, payment(order, 9999, "ok"), key);

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(json(missing).get("type").asText()).isEqualTo("https://idem.dev/problems/idempotency-key-missing");
    assertThat(json(malformed).get("type").asText()).isEqualTo("https://idem.dev/problems/idempotency-key-malformed");
    assertThat(reused.statusCode()).isEqualTo(422);
    assertThat(json(reused).get("type").asText()).isEqualTo("https://idem.dev/problems/idempotency-key-reused");
    assertThat(f.payments(order)).isEqualTo(1);
  }

  @Test
  void aBaseOfAboutBlankMakesEveryTypeAboutBlank() throws Exception {
    URI blank = f.serve(b -> b.problemTypeBase(URI.create("about:blank")));
    HttpResponse<String> missing = f.post(blank, payment(HttpFixture.unique("o"), 4000, "ok"));

    assertThat(missing.statusCode()).isEqualTo(400);
    assertThat(json(missing).get("type").asText()).isEqualTo("about:blank");
  }
}
