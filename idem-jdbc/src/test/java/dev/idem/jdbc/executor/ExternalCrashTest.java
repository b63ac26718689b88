package dev.idem.jdbc.executor;

import static org.assertj.core.api.Assertions.assertThat;

import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import dev.idem.result.Execution;
import dev.idem.testing.IdemTest;
import dev.idem.testing.TestDatabase;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** A real process claims an external effect and is killed with SIGKILL in phase 2. */
@IdemTest(poolSize = 4, sql = {ExecutorFixture.PAYMENTS, Provider.TABLE})
class ExternalCrashTest {
  static ExecutorFixture f;

  @BeforeAll
  static void start(TestDatabase db, DataSource ds) {
    f = new ExecutorFixture(db, ds);
  }

  @Test
  void anotherProcessTakesOverAfterTheLeaseAndTheProviderRecordsOneCharge() throws Exception {
    IdempotencyKey key = IdempotencyKey.of("crash", UUID.randomUUID().toString());
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process child = new ProcessBuilder(java, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp", System.getProperty("java.class.path"),
        ExternalChild.class.getName(), f.db.jdbcUrl(), key.scope(), key.value(), "1500")
        .redirectError(ProcessBuilder.Redirect.INHERIT)
        .start();
    String line;
    try {
      BufferedReader out = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8));
      line = out.readLine();
      assertThat(line).as("the child charged in phase 2").startsWith("CHARGED ch_").endsWith(" token 1");
      child.destroyForcibly(); // SIGKILL: no shutdown hook, no finally, no phase 3
      assertThat(child.waitFor(10, TimeUnit.SECONDS)).isTrue();
    } finally {
      child.destroyForcibly();
    }
    assertThat(child.exitValue()).isEqualTo(137); // 128 + SIGKILL
    assertThat(f.column(key, "state")).as("the claim outlived its holder").isEqualTo("I");

    List<ExternalAttempt> attempts = new CopyOnWriteArrayList<>();
    IdempotentExecutor survivor = f.idem.executor().lease(Duration.ofMillis(1500)).inFlightWait(Duration.ofSeconds(10)).build();
    Execution<String> e = survivor.executeExternal(key, Fingerprint.of("charge 42"), Codec.utf8(), a -> {
      attempts.add(a);
      return Provider.charge(f.ds, a.callKey().value(), 42);
    });

    assertThat(e.applied()).isTrue();
    assertThat(line).startsWith("CHARGED " + e.value() + " ");
    assertThat(attempts).singleElement().satisfies(a -> {
      assertThat(a.takeover()).isTrue();
      assertThat(a.token().value()).isEqualTo(2);
    });
    String callKey = Keys.child(key, "external").value();
    assertThat(f.count("SELECT count(*) FROM provider_charges WHERE call_key = '" + callKey + "'")).isEqualTo(1);
    assertThat(f.count("SELECT calls FROM provider_charges WHERE call_key = '" + callKey + "'")).isEqualTo(2);
    assertThat(f.column(key, "state")).isEqualTo("C");
    assertThat(f.column(key, "fence")).isEqualTo("2");
    assertThat(survivor.executeExternal(key, Fingerprint.of("charge 42"), Codec.utf8(), a -> "again").value()).isEqualTo(e.value());
  }
}
