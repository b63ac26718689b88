package dev.idem.result;

/**
 * Turns a result into bytes to store with its key, and back, so a repeat receives the first
 * result. {@link #none()} stores nothing, and lets the store skip the write that would hold it.
 *
 * <p>A codec must be deterministic enough that {@code decode(encode(x))} is what a repeat should
 * get. An {@code encode} that throws fails the call, and the effect is rolled back with it: a result
 * that cannot be stored cannot be replayed, so it must not be committed. For JSON, use {@code
 * dev.idem.jackson.JacksonCodec} (module {@code idem-jackson}).
 *
 * @param <T> the result type
 */
public interface Codec<T> {

  /** The bytes to store; {@code null} stores no result. */
  byte[] encode(T value) throws Exception;

  /** The result from stored bytes ({@code null} when none were stored). */
  T decode(byte[] bytes) throws Exception;

  /** Whether this codec never stores anything, so a store may skip writing a result. */
  default boolean storesNothing() {
    return false;
  }

  /** Stores nothing; every replay gets {@code null}. For effects whose caller needs only "done". */
  @SuppressWarnings("unchecked")
  static <T> Codec<T> none() {
    return (Codec<T>) BuiltInCodecs.NoResult.INSTANCE;
  }

  /** Strings as UTF-8. */
  static Codec<String> utf8() {
    return BuiltInCodecs.Utf8.INSTANCE;
  }

  /** Bytes as they are. */
  static Codec<byte[]> bytes() {
    return BuiltInCodecs.Bytes.INSTANCE;
  }
}
