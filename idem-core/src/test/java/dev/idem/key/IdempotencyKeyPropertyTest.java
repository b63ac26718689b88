package dev.idem.key;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/** Key validation over generated texts: all of visible ASCII passes, anything else is refused. */
class IdempotencyKeyPropertyTest {

  @Property(tries = 300)
  void everyVisibleAsciiTextUpTo255IsAccepted(@ForAll("visibleAscii") String text) {
    assertThat(IdempotencyKey.of("scope", text).value()).isEqualTo(text);
  }

  @Property(tries = 300)
  void anyTextWithACharacterOutsideVisibleAsciiIsRefused(
      @ForAll("visibleAscii") String prefix, @ForAll("outsideVisibleAscii") char bad) {
    String text = prefix.substring(0, Math.min(prefix.length(), 200)) + bad;
    assertThatThrownBy(() -> IdempotencyKey.of("scope", text))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("value ");
  }

  @Provide
  Arbitrary<String> visibleAscii() {
    return Arbitraries.strings().withCharRange('!', '~').ofMinLength(1).ofMaxLength(255);
  }

  @Provide
  Arbitrary<Character> outsideVisibleAscii() {
    return Arbitraries.oneOf(
        Arbitraries.chars().range('\u0000', ' '),
        Arbitraries.of('\u007f'),
        Arbitraries.chars().range('\u0080', '\uffff'));
  }
}
