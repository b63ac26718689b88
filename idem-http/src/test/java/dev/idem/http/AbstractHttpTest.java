package dev.idem.http;

import dev.idem.jdbc.Idem;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.net.URI;
import java.net.http.HttpResponse;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.TestInstance;

/**
 * A test class over one {@link HttpFixture}: the class's database from {@link IdemTest} (idem
 * migrated; the {@code payments} table made here, in the database's SQL), the fixture's servers on
 * it for all the class's tests, stopped after them. One instance per class, so the fixture is the
 * class's own.
 */
@IdemTest(poolSize = HttpFixture.POOL)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class AbstractHttpTest {
  HttpFixture f;

  @BeforeAll
  void startFixture(TestDatabase db, DataSource ds, Idem idem) {
    db.execute(HttpFixture.payments(db));
    f = new HttpFixture(db, ds, idem);
  }

  @AfterAll
  void stopServers() {
    f.close();
  }

  /** POST {@code body} to {@code uri} under {@code key}, failing the test on an I/O error. */
  HttpResponse<String> post(URI uri, String body, String key) {
    try {
      return f.post(uri, body, "Idempotency-Key", key);
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }
}
