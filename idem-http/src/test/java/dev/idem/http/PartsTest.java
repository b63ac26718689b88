package dev.idem.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.jdbc.Idem;
import java.lang.reflect.Proxy;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/** The filter's parts without HTTP: key parsing, the stored format, canonical JSON, policies, the builder. */
class PartsTest {

  @Test
  void anSfStringIsUnescapedAndABareKeyTakenAsItIs() throws Exception {
    assertThat(KeyHeader.parse("Idempotency-Key", " \"8e03978e-40d5\" ", false)).isEqualTo("8e03978e-40d5");
    assertThat(KeyHeader.parse("Idempotency-Key", "\"a\\\"b\\\\c\"", false)).isEqualTo("a\"b\\c");
    assertThat(KeyHeader.parse("Idempotency-Key", "8e03978e-40d5", true)).isEqualTo("8e03978e-40d5");
  }

  @Test
  void aMalformedKeySaysWhatIsWrong() {
    assertMalformed("\"abc", true, "no closing double quote");
    assertMalformed("\"a\\nb\"", true, "allows only");
    assertMalformed("\"a\" , \"b\"", true, "text after its closing double quote");
    assertMalformed("\"a\",\"b\"", true, "is a list");
    assertMalformed("\"a\";p=1", true, "has parameters");
    assertMalformed("abc", false, "double quotes");
    assertMalformed("a,b", true, "is a list");
    assertMalformed("\"a b\"", true, "contains a space");
    assertMalformed("\"" + "k".repeat(256) + "\"", true, "at most 255");
    assertMalformed("\"\"", true, "must not be empty");
    assertMalformed("\t", true, "is empty");
    // Java's HttpClient cannot send it, but a container hands bytes over 0x7E on as ISO-8859-1 chars.
    assertMalformed("\"caf\u00e9\"", true, "outside visible ASCII");
    assertMalformed("caf\u00e9", true, "non-ASCII");
  }

  private static void assertMalformed(String field, boolean bare, String message) {
    assertThatThrownBy(() -> KeyHeader.parse("Idempotency-Key", field, bare))
        .isInstanceOf(KeyHeader.Malformed.class).hasMessageStartingWith("Idempotency-Key").hasMessageContaining(message);
  }

  @Test
  void aStoredResponseRoundTripsAndACorruptOneIsRefused() throws Exception {
    StoredResponse response = new StoredResponse(201, List.of(new StoredResponse.Header("Content-Type", "application/json"),
        new StoredResponse.Header("Location", "/payments/é"), new StoredResponse.Header("Location", "/second")),
        "{\"id\":1}".getBytes(StandardCharsets.UTF_8));
    byte[] bytes = ResponseCodec.INSTANCE.encode(response);
    StoredResponse back = ResponseCodec.INSTANCE.decode(bytes);

    assertThat(back.status()).isEqualTo(201);
    assertThat(back.headers()).isEqualTo(response.headers());
    assertThat(back.body()).isEqualTo(response.body());
    assertThatThrownBy(() -> ResponseCodec.INSTANCE.decode(Arrays.copyOf(bytes, bytes.length - 1)))
        .hasMessageContaining("length");
    assertThatThrownBy(() -> ResponseCodec.INSTANCE.decode(Arrays.copyOf(bytes, bytes.length + 1)))
        .hasMessageContaining("left over");
    assertThatThrownBy(() -> ResponseCodec.INSTANCE.decode(new byte[] {'a', 'c', '\u0001'}))
        .hasMessageContaining("magic");
  }

  @Test
  void canonicalJsonIgnoresOrderWhitespaceAndNumberSpellingButNotValues() {
    String a = CanonicalJson.text(CanonicalJson.parse(bytes("{\"b\": [1, 2.50], \"a\": {\"y\": null, \"x\": \"\\u00e9\"}}")));
    String b = CanonicalJson.text(CanonicalJson.parse(bytes("{\"a\":{\"x\":\"é\",\"y\":null},\"b\":[1.0,25e-1]}")));
    assertThat(a).isEqualTo(b).isEqualTo("{\"a\":{\"x\":\"é\",\"y\":null},\"b\":[1,2.5]}");
    assertThat(CanonicalJson.text(CanonicalJson.parse(bytes("[2,1]")))).isNotEqualTo(
        CanonicalJson.text(CanonicalJson.parse(bytes("[1,2]"))));
    assertThat(CanonicalJson.text(CanonicalJson.parse(bytes("0.000")))).isEqualTo("0");
    assertThat(CanonicalJson.parse(bytes("{\"a\":1,\"a\":2}"))).isNull(); // which one counts is the parser's guess
    assertThat(CanonicalJson.parse(bytes("{\"a\":1} trailing"))).isNull();
    assertThat(CanonicalJson.parse(bytes(""))).isNull();
    assertThat(RequestFingerprint.isJson("application/merge-patch+json; charset=utf-8")).isTrue();
    assertThat(RequestFingerprint.isJson("text/plain")).isFalse();
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void theDefaultPolicyStoresSuccessesAndBusinessRefusalsOnly() {
    StorePolicy p = StorePolicy.DEFAULT;
    assertThat(p.stores(200)).isTrue();
    assertThat(p.stores(201)).isTrue();
    assertThat(p.stores(303)).isTrue();
    assertThat(p.stores(402)).isTrue();
    assertThat(p.stores(410)).isTrue();
    for (int status : new int[] {100, 400, 401, 403, 404, 409, 413, 422, 429, 500, 502, 503}) {
      assertThat(p.stores(status)).as("status %d", status).isFalse();
    }
    assertThat(StorePolicy.of(s -> true).stores(500)).isFalse();
    assertThatThrownBy(() -> p.alsoStoring(500)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("alsoStoring").hasMessageContaining("500");
    assertThat(p.notStoring(402).stores(402)).isFalse();
    assertThat(p.stores(402)).isTrue(); // immutable
  }

  @Test
  void theBuilderNamesTheArgumentItRefuses() {
    // Building sends nothing to the database: it only asks a connection's metadata which database
    // it is (to render its statements); a DataSource that refuses every other call proves it.
    DatabaseMetaData meta = refusingAllBut(DatabaseMetaData.class, Map.of("getDatabaseProductName", "PostgreSQL",
        "getDatabaseProductVersion", "17.5", "getDatabaseMajorVersion", 17, "getDatabaseMinorVersion", 5));
    Connection connection = refusingAllBut(Connection.class, Map.of("getMetaData", meta));
    DataSource ds = refusingAllBut(DataSource.class, Map.of("getConnection", connection));
    IdempotencyKeyFilter.Builder b = IdempotencyKeyFilter.builder(Idem.builder(ds).build());
    assertThatThrownBy(() -> IdempotencyKeyFilter.builder(null)).hasMessage("idem must not be null");
    assertThatThrownBy(() -> b.headerName("Idempotency Key")).hasMessageStartingWith("headerName");
    assertThatThrownBy(() -> b.maxBodySize(-1)).hasMessageStartingWith("maxBodySize");
    assertThatThrownBy(() -> b.guarded(null)).hasMessage("guarded must not be null");
    assertThatThrownBy(() -> b.replayedHeaders("X-A", " ")).hasMessageStartingWith("replayedHeaders");
    assertThatThrownBy(() -> RequestFingerprint.jsonFields("amount")).hasMessageStartingWith("pointers");
    assertThatThrownBy(() -> IdempotencyKeyFilter.builder(Idem.builder(ds).build())
        .inFlightWait(Duration.ofMillis(-1)).build()).hasMessageContaining("inFlightWait");
    assertThatThrownBy(() -> IdempotencyKeyFilter.builder(Idem.builder(ds).build())
        .name("has space").build()).hasMessageContaining("name");
    assertThat(b.problemTypeBase(URI.create("https://x/")).build()).isNotNull();
  }

  /** A {@code type} that answers the methods in {@code answers} (close: nothing) and refuses every other call. */
  private static <T> T refusingAllBut(Class<T> type, Map<String, Object> answers) {
    return type.cast(Proxy.newProxyInstance(PartsTest.class.getClassLoader(), new Class<?>[] {type}, (proxy, method, args) -> {
      if (answers.containsKey(method.getName())) {
        return answers.get(method.getName());
      }
      if (method.getName().equals("close")) {
        return null;
      }
      throw new UnsupportedOperationException("the builder must not touch the database: " + method.getName());
    }));
  }
}
