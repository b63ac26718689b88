package dev.idem.http;

import dev.idem.result.Codec;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * A stored response as a small binary format, never Java serialization (which would tie stored rows
 * to class layouts and deserialize whatever the table holds):
 *
 * <pre>
 * 'I' 'H' version(1)                    magic and format version
 * u16 status
 * u16 count, then per header: u32 length + UTF-8 name, u32 length + UTF-8 value
 * u32 length + body bytes
 * </pre>
 *
 * A decoder refuses anything else (another magic or version, a length past the end, bytes left
 * over), so a corrupt row is a {@code CodecException}, not a wrong replay.
 */
final class ResponseCodec implements Codec<StoredResponse> {
  static final ResponseCodec INSTANCE = new ResponseCodec();

  private static final byte[] MAGIC = {'I', 'H'};
  private static final byte VERSION = 1;

  private ResponseCodec() {}

  @Override
  public byte[] encode(StoredResponse response) throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(64 + response.body().length);
    DataOutputStream out = new DataOutputStream(bytes);
    out.write(MAGIC);
    out.writeByte(VERSION);
    out.writeShort(response.status());
    if (response.headers().size() > 0xFFFF) {
      throw new IOException("a response with " + response.headers().size() + " stored headers; at most 65535");
    }
    out.writeShort(response.headers().size());
    for (StoredResponse.Header h : response.headers()) {
      writeBytes(out, h.name().getBytes(StandardCharsets.UTF_8));
      writeBytes(out, h.value().getBytes(StandardCharsets.UTF_8));
    }
    writeBytes(out, response.body());
    out.flush();
    return bytes.toByteArray();
  }

  @Override
  public StoredResponse decode(byte[] stored) throws IOException {
    if (stored == null) {
      throw new IOException("no stored response");
    }
    ByteBuffer in = ByteBuffer.wrap(stored);
    try {
      if (in.get() != MAGIC[0] || in.get() != MAGIC[1]) {
        throw new IOException("not a stored HTTP response (wrong magic bytes)");
      }
      byte version = in.get();
      if (version != VERSION) {
        throw new IOException("stored HTTP response format version " + version + "; this version reads " + VERSION);
      }
      int status = Short.toUnsignedInt(in.getShort());
      int count = Short.toUnsignedInt(in.getShort());
      List<StoredResponse.Header> headers = new ArrayList<>(count);
      for (int i = 0; i < count; i++) {
        headers.add(new StoredResponse.Header(readText(in), readText(in)));
      }
      byte[] body = readBytes(in);
      if (in.hasRemaining()) {
        throw new IOException(in.remaining() + " bytes left over after the stored HTTP response");
      }
      return new StoredResponse(status, headers, body);
    } catch (BufferUnderflowException e) {
      throw new IOException("stored HTTP response is truncated", e);
    }
  }

  private static void writeBytes(DataOutputStream out, byte[] bytes) throws IOException {
    out.writeInt(bytes.length);
    out.write(bytes);
  }

  private static byte[] readBytes(ByteBuffer in) throws IOException {
    int length = in.getInt();
    if (length < 0 || length > in.remaining()) {
      throw new IOException("stored HTTP response has a length of " + Integer.toUnsignedString(length)
          + " with " + in.remaining() + " bytes left");
    }
    byte[] bytes = new byte[length];
    in.get(bytes);
    return bytes;
  }

  private static String readText(ByteBuffer in) throws IOException {
    return new String(readBytes(in), StandardCharsets.UTF_8);
  }

  @Override
  public String toString() {
    return "IdempotencyKeyFilter's response codec";
  }
}
