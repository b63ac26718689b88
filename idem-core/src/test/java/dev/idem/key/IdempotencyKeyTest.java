package dev.idem.key;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class IdempotencyKeyTest {

  @Test
  void aValidKeyKeepsItsScopeAndValue() {
    IdempotencyKey key = IdempotencyKey.of("merchant-42/payments", "chk_7f3a9c");
    assertThat(key.scope()).isEqualTo("merchant-42/payments");
    assertThat(key.value()).isEqualTo("chk_7f3a9c");
    assertThat(key).isEqualTo(new IdempotencyKey("merchant-42/payments", "chk_7f3a9c"));
    assertThat(key).hasToString("merchant-42/payments:chk_7f3a9c");
  }

  @Test
  void theLimitsAreInclusive() {
    String longest = "k".repeat(IdempotencyKey.MAX_LENGTH);
    assertThat(IdempotencyKey.of("s", longest).value()).hasSize(255);
    assertThat(IdempotencyKey.of("!", "~").value()).isEqualTo("~"); // both ends of visible ASCII
  }

  @Test
  void nullIsRefusedNamingThePart() {
    assertThatThrownBy(() -> IdempotencyKey.of("s", null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("value must not be null");
    assertThatThrownBy(() -> IdempotencyKey.of(null, "v"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("scope must not be null");
  }

  @Test
  void emptyIsRefused() {
    assertThatThrownBy(() -> IdempotencyKey.of("s", ""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("value must not be empty");
    assertThatThrownBy(() -> IdempotencyKey.of("", "v"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("scope must not be empty");
  }

  @Test
  void aBlankScopeIsRefused() {
    assertThatThrownBy(() -> IdempotencyKey.of("   ", "v"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("scope must not be blank (it is only whitespace)");
    assertThatThrownBy(() -> IdempotencyKey.of("s", " \t "))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("value must not be blank (it is only whitespace)");
  }

  @Test
  void longerThan255IsRefusedWithTheLength() {
    assertThatThrownBy(() -> IdempotencyKey.of("s", "k".repeat(256)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("value is 256 characters long; at most 255 are allowed");
    assertThatThrownBy(() -> IdempotencyKey.of("s".repeat(300), "v"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("scope is 300 characters long; at most 255 are allowed");
  }

  @Test
  void aControlCharacterIsRefusedWithItsCodeAndPosition() {
    assertThatThrownBy(() -> IdempotencyKey.of("s", "abc\n"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("value contains a control character (U+000A) at index 3; only visible ASCII ('!' to '~') is allowed");
    assertThatThrownBy(() -> IdempotencyKey.of("s", "a\u007fb"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("value contains a control character (U+007F) at index 1");
    assertThatThrownBy(() -> IdempotencyKey.of("te\u0000nant", "v"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("scope contains a control character (U+0000) at index 2");
  }

  @Test
  void nonAsciiIsRefusedWithItsCodePoint() {
    assertThatThrownBy(() -> IdempotencyKey.of("s", "café"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("value contains a non-ASCII character (U+00E9) at index 3; only visible ASCII ('!' to '~') is allowed");
    // A character outside the BMP is named by its code point, not by half of a surrogate pair.
    assertThatThrownBy(() -> IdempotencyKey.of("s", "pay\uD83D\uDE00"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("value contains a non-ASCII character (U+1F600) at index 3");
    // A non-breaking space is not blank to Java; it is still refused, as non-ASCII.
    assertThatThrownBy(() -> IdempotencyKey.of("\u00a0", "v"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("scope contains a non-ASCII character (U+00A0) at index 0");
  }

  @Test
  void anInnerSpaceIsRefused() {
    assertThatThrownBy(() -> IdempotencyKey.of("s", "order 17"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("value contains a space at index 5; only visible ASCII ('!' to '~') is allowed");
  }

  @Test
  void checkNamesWhatItChecks() {
    assertThat(IdempotencyKey.check("message id", "evt_1")).isEqualTo("evt_1");
    assertThatThrownBy(() -> IdempotencyKey.check("message id", ""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("message id must not be empty");
  }

  @Test
  void theSameValueInTwoScopesIsTwoKeys() {
    IdempotencyKey a = IdempotencyKey.of("merchant-1", "order-17");
    IdempotencyKey b = IdempotencyKey.of("merchant-2", "order-17");
    assertThat(a).isNotEqualTo(b);
    // And their derived keys stay apart too, because derivation keeps the scope.
    assertThat(Keys.child(a, "payment")).isNotEqualTo(Keys.child(b, "payment"));
    assertThat(Keys.child(a, "payment").scope()).isEqualTo("merchant-1");
  }

  @Test
  void aKeyReuseExceptionNamesAMissingArgument() {
    IdempotencyKey key = IdempotencyKey.of("shop-7", "k1");
    assertThatThrownBy(() -> new KeyReuseException(key, (Fingerprint) null, Fingerprint.EMPTY))
        .isInstanceOf(IllegalArgumentException.class).hasMessage("stored must not be null");
    assertThatThrownBy(() -> new KeyReuseException(key, "0A", Fingerprint.EMPTY))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("storedHex must be 1 to 64 lower-case hex digits");
    assertThat(new KeyReuseException(key, Fingerprint.of("a"), Fingerprint.of("b")).key()).isEqualTo(key);
  }
}
