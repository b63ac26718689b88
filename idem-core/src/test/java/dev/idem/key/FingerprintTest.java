package dev.idem.key;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.idem.internal.base.Sha256;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import org.junit.jupiter.api.Test;

class FingerprintTest {

  @Test
  void aFingerprintIsTheSha256OfTheCanonicalBytes() {
    byte[] request = "{\"amount\":4000,\"currency\":\"USD\"}".getBytes(StandardCharsets.UTF_8);
    assertThat(Fingerprint.of(request).hex()).isEqualTo(Sha256.hex(request));
    assertThat(Fingerprint.of("{\"amount\":4000,\"currency\":\"USD\"}")).isEqualTo(Fingerprint.of(request));
    // The SHA-256 of nothing, a value every implementation agrees on.
    assertThat(Fingerprint.EMPTY.hex()).isEqualTo("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  }

  @Test
  void fieldOrderDoesNotMatter() {
    Map<String, Object> one = new LinkedHashMap<>();
    one.put("amount", 4000);
    one.put("currency", "USD");
    one.put("account", "acct_1");
    Map<String, Object> other = new LinkedHashMap<>();
    other.put("account", "acct_1");
    other.put("currency", "USD");
    other.put("amount", 4000);
    assertThat(Fingerprint.ofFields(one)).isEqualTo(Fingerprint.ofFields(other));
    assertThat(Fingerprint.ofFields(one)).isEqualTo(Fingerprint.ofFields(new TreeMap<>(one)));
  }

  @Test
  void differentValuesGiveDifferentFingerprints() {
    Fingerprint forty = Fingerprint.ofFields(Map.of("amount", 4000, "currency", "USD"));
    assertThat(Fingerprint.ofFields(Map.of("amount", 4001, "currency", "USD"))).isNotEqualTo(forty);
    assertThat(Fingerprint.ofFields(Map.of("amount", 4000, "currency", "EUR"))).isNotEqualTo(forty);
    assertThat(Fingerprint.ofFields(Map.of("amount", 4000))).isNotEqualTo(forty); // a field dropped
    assertThat(Fingerprint.ofFields(Map.of("amount", 4000, "currency", "USD", "tip", 0))).isNotEqualTo(forty);
  }

  @Test
  void nestedMapsIgnoreOrderAndListsKeepIt() {
    Map<String, Object> addressA = new LinkedHashMap<>();
    addressA.put("city", "Lyon");
    addressA.put("zip", "69001");
    Map<String, Object> addressB = new LinkedHashMap<>();
    addressB.put("zip", "69001");
    addressB.put("city", "Lyon");
    assertThat(Fingerprint.ofFields(Map.of("ship_to", addressA, "items", List.of("a", "b"))))
        .isEqualTo(Fingerprint.ofFields(Map.of("items", List.of("a", "b"), "ship_to", addressB)));
    assertThat(Fingerprint.ofFields(Map.of("items", List.of("a", "b"))))
        .isNotEqualTo(Fingerprint.ofFields(Map.of("items", List.of("b", "a"))));
    assertThat(Fingerprint.ofFields(Map.of("items", List.of(Map.of("sku", "x", "qty", 2)))))
        .isNotEqualTo(Fingerprint.ofFields(Map.of("items", List.of(Map.of("sku", "x", "qty", 3)))));
    // Arrays are lists.
    assertThat(Fingerprint.ofFields(Map.of("items", new String[] {"a", "b"})))
        .isEqualTo(Fingerprint.ofFields(Map.of("items", List.of("a", "b"))));
  }

  @Test
  void setsIgnoreOrder() {
    Set<String> ab = new LinkedHashSet<>(List.of("a", "b"));
    Set<String> ba = new LinkedHashSet<>(List.of("b", "a"));
    assertThat(Fingerprint.ofFields(Map.of("tags", ab))).isEqualTo(Fingerprint.ofFields(Map.of("tags", ba)));
    assertThat(Fingerprint.ofFields(Map.of("tags", ab))).isNotEqualTo(Fingerprint.ofFields(Map.of("tags", Set.of("a"))));
  }

  @Test
  void attemptsAtAmbiguityGiveDifferentFingerprints() {
    // The separator moved between name and value.
    assertThat(Fingerprint.ofFields(Map.of("a", "b=c"))).isNotEqualTo(Fingerprint.ofFields(Map.of("a=b", "c")));
    assertThat(Fingerprint.ofFields(Map.of("a", "b:c"))).isNotEqualTo(Fingerprint.ofFields(Map.of("a:b", "c")));
    // Two fields folded into one, with the encoding's own punctuation.
    assertThat(Fingerprint.ofFields(Map.of("a", "1", "b", "2")))
        .isNotEqualTo(Fingerprint.ofFields(Map.of("a", "1s1#b2", "b", "2")));
    assertThat(Fingerprint.ofFields(Map.of("a", "x,b=y"))).isNotEqualTo(Fingerprint.ofFields(Map.of("a", "x", "b", "y")));
    // A list and the same items joined.
    assertThat(Fingerprint.ofFields(Map.of("a", List.of("x", "y")))).isNotEqualTo(Fingerprint.ofFields(Map.of("a", "x,y")));
    assertThat(Fingerprint.ofFields(Map.of("a", List.of("x", "y")))).isNotEqualTo(Fingerprint.ofFields(Map.of("a", List.of("xy"))));
    assertThat(Fingerprint.ofFields(Map.of("a", List.of(List.of("x"), "y"))))
        .isNotEqualTo(Fingerprint.ofFields(Map.of("a", List.of(List.of("x", "y")))));
    // A nested map and a flattened name.
    assertThat(Fingerprint.ofFields(Map.of("a", Map.of("b", "c")))).isNotEqualTo(Fingerprint.ofFields(Map.of("a.b", "c")));
    // Kinds are kept: a number is not its text, null is not "null", bytes are not their hex.
    assertThat(Fingerprint.ofFields(Map.of("a", 1))).isNotEqualTo(Fingerprint.ofFields(Map.of("a", "1")));
    assertThat(Fingerprint.ofFields(Map.of("a", true))).isNotEqualTo(Fingerprint.ofFields(Map.of("a", "true")));
    assertThat(Fingerprint.ofFields(mapOf("a", null))).isNotEqualTo(Fingerprint.ofFields(Map.of("a", "null")));
    assertThat(Fingerprint.ofFields(mapOf("a", null))).isNotEqualTo(Fingerprint.ofFields(Map.of()));
    assertThat(Fingerprint.ofFields(Map.of("a", new byte[] {1}))).isNotEqualTo(Fingerprint.ofFields(Map.of("a", "01")));
    assertThat(Fingerprint.ofFields(Map.of("a", List.of()))).isNotEqualTo(Fingerprint.ofFields(Map.of("a", Map.of())));
    assertThat(Fingerprint.ofFields(Map.of("a", 40))).isNotEqualTo(Fingerprint.ofFields(Map.of("a", 40.0)));
  }

  @Test
  void equalValuesOfEqualKindAgree() {
    assertThat(Fingerprint.ofFields(Map.of("a", 40))).isEqualTo(Fingerprint.ofFields(Map.of("a", 40L)));
    assertThat(Fingerprint.ofFields(Map.of("a", new byte[] {1, 2}))).isEqualTo(Fingerprint.ofFields(Map.of("a", new byte[] {1, 2})));
    UUID id = UUID.fromString("7f3a9c00-0000-4000-8000-000000000001");
    Instant at = Instant.parse("2026-10-28T02:00:00Z");
    assertThat(Fingerprint.ofFields(Map.of("id", id, "at", at)))
        .isEqualTo(Fingerprint.ofFields(Map.of("at", Instant.parse("2026-10-28T02:00:00Z"), "id", UUID.fromString(id.toString()))));
    assertThat(Fingerprint.ofFields(Map.of("kind", Kind.CARD))).isNotEqualTo(Fingerprint.ofFields(Map.of("kind", Kind.WALLET)));
    assertThat(Fingerprint.ofFields(Map.of("line", new Line("sku-1", 2))))
        .isEqualTo(Fingerprint.ofFields(Map.of("line", new Line("sku-1", 2))));
  }

  @Test
  void theCanonicalFormIsReadable() {
    assertThat(Fingerprint.canonical(Map.of("a", "b=c"))).isEqualTo("{1:1#as3#b=c}");
    assertThat(Fingerprint.canonical(Map.of("a=b", "c"))).isEqualTo("{1:3#a=bs1#c}");
  }

  @Test
  void badInputIsRefusedNamingWhere() {
    assertThatThrownBy(() -> Fingerprint.ofFields(null)).hasMessage("fields must not be null");
    assertThatThrownBy(() -> Fingerprint.of((byte[]) null)).hasMessage("canonical request bytes must not be null");
    assertThatThrownBy(() -> Fingerprint.of((String) null)).hasMessage("canonical request must not be null");
    assertThatThrownBy(() -> Fingerprint.ofFields(mapOf(null, "x"))).hasMessage("fields has a null name");
    Map<Object, Object> twoOnes = new HashMap<>();
    twoOnes.put(1, "int");
    twoOnes.put("1", "text");
    assertThatThrownBy(() -> Fingerprint.ofFields(Map.of("m", twoOnes))).hasMessage("fields.m has two names that read \"1\"");
    assertThatThrownBy(() -> Fingerprint.ofFields(Map.of("items", List.of("a", new Object()))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("fields.items[1] is a java.lang.Object, which has no toString() of its own");
    List<Object> cycle = new ArrayList<>();
    cycle.add(cycle);
    assertThatThrownBy(() -> Fingerprint.ofFields(Map.of("c", cycle))).hasMessage("fields.c[0] contains itself; a request has no cycles");
    assertThatThrownBy(() -> new Fingerprint("ABC")).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("fingerprint must be 64 lower-case hex characters, was ABC");
  }

  @Test
  void aRecordIsTakenByItsComponentsNotItsText() {
    // toString() would print the array as an identity hash: two equal uploads would differ
    assertThat(Fingerprint.ofFields(Map.of("upload", new Upload("a.txt", new byte[] {1, 2, 3}))))
        .isEqualTo(Fingerprint.ofFields(Map.of("upload", new Upload("a.txt", new byte[] {1, 2, 3}))));
    assertThat(Fingerprint.ofFields(Map.of("upload", new Upload("a.txt", new byte[] {1, 2, 3}))))
        .isNotEqualTo(Fingerprint.ofFields(Map.of("upload", new Upload("a.txt", new byte[] {1, 2, 4}))));
    // toString() would read "Transfer[from=acct-1, to=acct-2, to=acct-3]" for both
    assertThat(Fingerprint.ofFields(Map.of("t", new Transfer("acct-1, to=acct-2", "acct-3"))))
        .isNotEqualTo(Fingerprint.ofFields(Map.of("t", new Transfer("acct-1", "acct-2, to=acct-3"))));
    assertThat(Fingerprint.ofFields(Map.of("t", new Transfer("a", "b"))))
        .isNotEqualTo(Fingerprint.ofFields(Map.of("t", Map.of("from", "a", "to", "b"))));
    assertThat(Fingerprint.canonical(Map.of("line", new Line("sku-1", 2)))).isEqualTo("{1:4#line(2:3#skus5#sku-13#qtyd1#2)}");
  }

  @Test
  void aPathIsTakenByItsText() {
    assertThat(Fingerprint.canonical(Map.of("file", Path.of("in", "a.csv")))).isEqualTo("{1:4#fileo8#in/a.csv}");
  }

  @Test
  void aNestedNameWithoutItsOwnTextIsRefused() {
    Map<Object, Object> byObject = new HashMap<>();
    byObject.put(new Object(), "x");
    assertThatThrownBy(() -> Fingerprint.ofFields(Map.of("m", byObject)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageStartingWith("fields.m has a name of class java.lang.Object, which has no toString() of its own");
  }

  @Test
  void theSameListTwiceIsNotACycle() {
    List<String> shared = List.of("x");
    assertThat(Fingerprint.canonical(Map.of("a", Arrays.asList(shared, shared)))).isEqualTo("{1:1#a[2:[1:s1#x][1:s1#x]]}");
  }

  /** An Optional is taken by its value, never by its toString() ("Optional[...]", unescaped). */
  @Test
  void anOptionalIsTakenByItsValue() {
    assertThat(Fingerprint.ofFields(Map.of("tags", java.util.Optional.of(List.of("a, b")))))
        .isNotEqualTo(Fingerprint.ofFields(Map.of("tags", java.util.Optional.of(List.of("a", "b")))));
    assertThat(Fingerprint.ofFields(Map.of("card", java.util.Optional.of(new byte[] {1, 2}))))
        .isEqualTo(Fingerprint.ofFields(Map.of("card", java.util.Optional.of(new byte[] {1, 2}))));
    assertThat(Fingerprint.ofFields(Map.of("note", java.util.Optional.empty())))
        .isNotEqualTo(Fingerprint.ofFields(Map.of("note", java.util.Optional.of("null"))))
        .isEqualTo(Fingerprint.ofFields(Map.of("note", java.util.Optional.empty())));
  }

  @Test
  void aFingerprintPrintsShort() {
    assertThat(Fingerprint.EMPTY).hasToString("e3b0c44298fc…");
  }

  enum Kind { CARD, WALLET }

  record Line(String sku, int qty) {}

  record Upload(String name, byte[] content) {}

  record Transfer(String from, String to) {}

  private static Map<String, Object> mapOf(String name, Object value) {
    Map<String, Object> map = new HashMap<>();
    map.put(name, value);
    return map;
  }
}
