package dev.idem.jackson;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.type.TypeReference;
import dev.idem.result.Codec;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The Jackson lines of docs/core-results-and-events.md, compiled and run. */
class JacksonDocsExampleTest {

  record Receipt(String chargeId, long amountCents) {}

  @Test
  void theCodecsOfThePage() throws Exception {
    Codec<Receipt> json = JacksonCodec.of(Receipt.class);                          // idem-jackson
    Codec<List<Receipt>> list = JacksonCodec.of(new TypeReference<List<Receipt>>() {});
    Receipt first = new Receipt("ch_1", 4000);
    assertThat(json.decode(json.encode(first))).isEqualTo(first);
    assertThat(list.decode(list.encode(List.of(first)))).containsExactly(first);
  }
}
