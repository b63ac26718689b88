package dev.idem.jackson;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import dev.idem.result.Codec;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.OffsetDateTime;
import java.time.ZonedDateTime;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JacksonCodecTest {

  /** A charge result as a payment API would replay it. */
  record Charge(String id, long amountCents, String currency, List<String> tags, Map<String, String> metadata) {}

  /** Jackson's default mapper finds no property to write here. */
  static final class Opaque {
    @SuppressWarnings("unused")
    private final int hidden = 1;
  }

  @Test
  void aRecordRoundTripsThroughJson() throws Exception {
    Codec<Charge> codec = JacksonCodec.of(Charge.class);
    Charge first = new Charge("ch_1", 4000, "USD", List.of("first"), Map.of("order", "o1"));
    byte[] stored = codec.encode(first);
    assertThat(new String(stored, StandardCharsets.UTF_8)).contains("\"id\":\"ch_1\"").contains("\"amountCents\":4000");
    Charge replayed = codec.decode(stored);
    assertThat(replayed).isEqualTo(first);
    assertThat(codec.storesNothing()).isFalse();
  }

  /** A receipt with money and a local time, as a payment API in Berlin would answer. */
  record Receipt(String id, BigDecimal amount, OffsetDateTime at, ZonedDateTime due) {}

  @Test
  void aDateKeepsItsOffsetAndAnAmountItsScale() throws Exception {
    Codec<Receipt> codec = JacksonCodec.of(Receipt.class);
    Receipt first = new Receipt("r_1", new BigDecimal("40.10"), OffsetDateTime.parse("2026-12-03T10:00:00.123456+01:00"),
        ZonedDateTime.parse("2026-12-31T12:00:00+01:00[Europe/Paris]"));
    byte[] stored = codec.encode(first);
    assertThat(new String(stored, StandardCharsets.UTF_8))
        .contains("\"amount\":40.10").contains("\"at\":\"2026-12-03T10:00:00.123456+01:00\"")
        .contains("\"due\":\"2026-12-31T12:00:00+01:00[Europe/Paris]\"");
    assertThat(codec.decode(stored)).isEqualTo(first);
  }

  @Test
  void aGenericTypeRoundTripsThroughATypeReference() throws Exception {
    Codec<List<Charge>> codec = JacksonCodec.of(new TypeReference<List<Charge>>() {});
    List<Charge> first = List.of(new Charge("ch_1", 1, "EUR", List.of(), Map.of()), new Charge("ch_2", 2, "EUR", List.of(), Map.of()));
    assertThat(codec.decode(codec.encode(first))).isEqualTo(first);
  }

  @Test
  void nullStoresNoResult() throws Exception {
    Codec<Charge> codec = JacksonCodec.of(Charge.class);
    assertThat(codec.encode(null)).isNull();
    assertThat(codec.decode(null)).isNull();
  }

  @Test
  void aValueJacksonCannotWriteFailsWithItsException() {
    // The executor turns this into a CodecException and rolls the effect back: a result that
    // cannot be stored cannot be replayed.
    Codec<Opaque> codec = JacksonCodec.of(Opaque.class);
    assertThatThrownBy(() -> codec.encode(new Opaque()))
        .isInstanceOf(JsonProcessingException.class)
        .hasMessageContaining("No serializer found");
  }

  @Test
  void storedBytesThatAreNotTheTypeFailToDecode() {
    Codec<Charge> codec = JacksonCodec.of(Charge.class);
    assertThatThrownBy(() -> codec.decode("[1,2]".getBytes(StandardCharsets.UTF_8))).isInstanceOf(JsonProcessingException.class);
  }

  @Test
  void aMapperOfYourOwnIsUsed() throws Exception {
    ObjectMapper mapper = new ObjectMapper().disable(SerializationFeature.FAIL_ON_EMPTY_BEANS);
    Codec<Opaque> codec = JacksonCodec.of(mapper, Opaque.class);
    assertThat(new String(codec.encode(new Opaque()), StandardCharsets.UTF_8)).isEqualTo("{}");
  }

  @Test
  void badArgumentsAreNamed() {
    assertThatThrownBy(() -> JacksonCodec.of((Class<String>) null)).hasMessage("type must not be null");
    assertThatThrownBy(() -> JacksonCodec.of(null, String.class)).hasMessage("mapper must not be null");
    assertThatThrownBy(() -> JacksonCodec.of((TypeReference<String>) null)).hasMessage("type must not be null");
    assertThat(JacksonCodec.of(Charge.class).toString()).startsWith("JacksonCodec[");
  }
}
