package dev.idem.result;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class CodecTest {

  @Test
  void noneStoresNothingAndReplaysNull() throws Exception {
    Codec<Integer> none = Codec.none();
    assertThat(none.storesNothing()).isTrue();
    assertThat(none.encode(42)).isNull();
    assertThat(none.decode(new byte[] {1})).isNull();
  }

  @Test
  void utf8RoundTripsAnyText() throws Exception {
    Codec<String> utf8 = Codec.utf8();
    assertThat(utf8.storesNothing()).isFalse();
    String text = "reçu nº 42 ✓ \uD83D\uDE00";
    assertThat(utf8.encode(text)).isEqualTo(text.getBytes(StandardCharsets.UTF_8));
    assertThat(utf8.decode(utf8.encode(text))).isEqualTo(text);
    assertThat(utf8.encode(null)).isNull();
    assertThat(utf8.decode(null)).isNull();
  }

  @Test
  void bytesAreStoredAsACopy() throws Exception {
    Codec<byte[]> bytes = Codec.bytes();
    byte[] result = {1, 2, 3};
    byte[] stored = bytes.encode(result);
    result[0] = 9; // the caller changes its array after the call
    assertThat(bytes.decode(stored)).containsExactly(1, 2, 3);
    assertThat(bytes.encode(null)).isNull();
  }

  @Test
  void aCodecOfYourOwnIsALambdaPairAway() throws Exception {
    Codec<Long> longs = new Codec<>() {
      @Override
      public byte[] encode(Long value) {
        return Long.toString(value).getBytes(StandardCharsets.US_ASCII);
      }

      @Override
      public Long decode(byte[] bytes) {
        return Long.parseLong(new String(bytes, StandardCharsets.US_ASCII));
      }
    };
    assertThat(longs.decode(longs.encode(1_793_152_800L))).isEqualTo(1_793_152_800L);
    assertThat(longs.storesNothing()).isFalse();
  }
}
