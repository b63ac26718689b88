package dev.idem.jackson;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.idem.result.Codec;

/**
 * Stores results as JSON through Jackson. Records and plain Java beans work with the default
 * mapper; pass your own mapper to share its modules and settings.
 *
 * <p>The default mapper registers the Jackson modules found on the class path (add {@code
 * jackson-datatype-jsr310} for {@code java.time}) and writes dates as ISO-8601 text with their
 * offset, and a {@code ZonedDateTime} with its zone id too, read back as written: a result's
 * {@code OffsetDateTime} replays with its own offset, not moved to UTC, a {@code ZonedDateTime}
 * in {@code Europe/Paris} stays there, and a {@code BigDecimal} field keeps its scale ({@code 1.10}
 * stays {@code 1.10}).
 *
 * <p>Guarantees: a replay decodes to an object equal to the first result when every field's
 * declared type says what to build (records, beans, {@code List<Receipt>}). Does not guarantee:
 * equality where a field is declared {@code Object} (or a raw {@code Map}): JSON keeps no Java
 * type, so such a field decodes to JSON's natural one (a {@code BigDecimal} there comes back a
 * {@code Double}, a {@code long} that fits an int an {@code Integer}); declare the type. Nor that a
 * stored result decodes after you change its class incompatibly: a key outlives a deploy for as
 * long as its dedupe window, so evolve result types the way you evolve an API response.
 *
 * @param <T> the result type
 */
public final class JacksonCodec<T> implements Codec<T> {
  private final ObjectMapper mapper;
  private final JavaType type;

  private JacksonCodec(ObjectMapper mapper, JavaType type) {
    this.mapper = mapper;
    this.type = type;
  }

  /** A codec for {@code type} with the default mapper (see the class comment). */
  public static <T> JacksonCodec<T> of(Class<T> type) {
    return of(defaultMapper(), type);
  }

  /** A codec for {@code type} with the given mapper. */
  public static <T> JacksonCodec<T> of(ObjectMapper mapper, Class<T> type) {
    if (mapper == null) {
      throw new IllegalArgumentException("mapper must not be null");
    }
    if (type == null) {
      throw new IllegalArgumentException("type must not be null");
    }
    return new JacksonCodec<>(mapper, mapper.constructType(type));
  }

  /**
   * A codec for a generic type, e.g. {@code new TypeReference<List<Receipt>>() {}}, with the
   * default mapper (see the class comment).
   */
  public static <T> JacksonCodec<T> of(TypeReference<T> type) {
    return of(defaultMapper(), type);
  }

  /** A new mapper with the modules on the class path; dates as text, read back with their offset or zone. */
  private static ObjectMapper defaultMapper() {
    return JsonMapper.builder()
        .findAndAddModules()
        .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS)
        .enable(SerializationFeature.WRITE_DATES_WITH_ZONE_ID)
        .disable(DeserializationFeature.ADJUST_DATES_TO_CONTEXT_TIME_ZONE)
        .build();
  }

  /** A codec for a generic type with the given mapper. */
  public static <T> JacksonCodec<T> of(ObjectMapper mapper, TypeReference<T> type) {
    if (mapper == null) {
      throw new IllegalArgumentException("mapper must not be null");
    }
    if (type == null) {
      throw new IllegalArgumentException("type must not be null");
    }
    return new JacksonCodec<>(mapper, mapper.constructType(type));
  }

  /**
   * The result as JSON bytes; {@code null} for {@code null}, so no result is stored.
   *
   * @throws com.fasterxml.jackson.core.JsonProcessingException if Jackson cannot write the value
   *     (a class with no properties, a type that needs a module); the executor fails the call and
   *     rolls the effect back
   */
  @Override
  public byte[] encode(T value) throws Exception {
    return value == null ? null : mapper.writeValueAsBytes(value);
  }

  @Override
  public T decode(byte[] bytes) throws Exception {
    return bytes == null ? null : mapper.readValue(bytes, type);
  }

  @Override
  public String toString() {
    return "JacksonCodec[" + type + "]";
  }
}
