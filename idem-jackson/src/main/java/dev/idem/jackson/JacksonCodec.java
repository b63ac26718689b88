package dev.idem.jackson;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.idem.result.Codec;

/**
 * Stores results as JSON through Jackson. Records and plain Java beans work with a default
 * {@link ObjectMapper}; pass your own mapper to share its modules and settings.
 *
 * <p>Guarantees: a replay decodes to an object equal in its JSON-visible state to the first
 * result. Does not guarantee: that a stored result decodes after you change its class
 * incompatibly; a key outlives a deploy for as long as its dedupe window, so evolve result types
 * the way you evolve an API response.
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

  /** A codec for {@code type} with a default mapper. */
  public static <T> JacksonCodec<T> of(Class<T> type) {
    return of(new ObjectMapper().findAndRegisterModules(), type);
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

  /** A codec for a generic type, e.g. {@code new TypeReference<List<Receipt>>() {}}, with a default mapper. */
  public static <T> JacksonCodec<T> of(TypeReference<T> type) {
    return of(new ObjectMapper().findAndRegisterModules(), type);
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
