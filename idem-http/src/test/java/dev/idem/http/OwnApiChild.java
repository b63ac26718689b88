package dev.idem.http;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.idem.http.client.CallPolicy;
import dev.idem.http.client.CallRetryBudget;
import dev.idem.http.client.IntentKeys;
import dev.idem.http.client.OwnApiCalls;
import dev.idem.http.client.ProviderCalls;
import dev.idem.jdbc.Idem;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;

/**
 * The client process {@link OwnApiCallsTest} kills and starts again: it sends one payment for an
 * intent through {@link OwnApiCalls}, and prints the answer's status. Arguments: JDBC URL, the
 * payments URI, the intent, the order, the card, and where the keys are: {@code database}, or a
 * directory for {@link IntentKeys#file}.
 */
public final class OwnApiChild {
  private OwnApiChild() {}

  public static void main(String[] args) throws Exception {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(args[0]);
    config.setMaximumPoolSize(2);
    try (HikariDataSource ds = new HikariDataSource(config)) {
      Idem idem = Idem.builder(ds).build();
      IntentKeys keys = args[5].equals("database") ? IntentKeys.database(idem) : IntentKeys.file(Path.of(args[5]));
      OwnApiCalls payments = OwnApiCalls.of(keys, ProviderCalls.of(
          CallPolicy.builder().attemptTimeout(Duration.ofSeconds(30)).build(), CallRetryBudget.standard()));
      HttpRequest request = HttpRequest.newBuilder(URI.create(args[1])).header("Content-Type", "application/json")
          .POST(HttpRequest.BodyPublishers.ofString(HttpFixture.payment(args[3], 4000, args[4]))).build();
      HttpResponse<String> r = payments.send(HttpClient.newHttpClient(), args[2], request, HttpResponse.BodyHandlers.ofString());
      System.out.println("STATUS " + r.statusCode() + " replayed=" + r.headers().firstValue("Idempotent-Replayed").orElse("false"));
      System.out.flush();
    }
  }
}
