package dev.idem.result;

import java.nio.charset.StandardCharsets;

/** The codecs {@link Codec} hands out; package-private, so they are not API of their own. */
final class BuiltInCodecs {
  private BuiltInCodecs() {}

  /** See {@link Codec#none()}. */
  enum NoResult implements Codec<Object> {
    INSTANCE;

    @Override
    public byte[] encode(Object value) {
      return null;
    }

    @Override
    public Object decode(byte[] bytes) {
      return null;
    }

    @Override
    public boolean storesNothing() {
      return true;
    }
  }

  /** See {@link Codec#utf8()}. */
  enum Utf8 implements Codec<String> {
    INSTANCE;

    @Override
    public byte[] encode(String value) {
      return value == null ? null : value.getBytes(StandardCharsets.UTF_8);
    }

    @Override
    public String decode(byte[] bytes) {
      return bytes == null ? null : new String(bytes, StandardCharsets.UTF_8);
    }
  }

  /** See {@link Codec#bytes()}. */
  enum Bytes implements Codec<byte[]> {
    INSTANCE;

    @Override
    public byte[] encode(byte[] value) {
      return value == null ? null : value.clone();
    }

    @Override
    public byte[] decode(byte[] bytes) {
      return bytes;
    }
  }
}
