package dev.idem.key;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Assume;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/** Fingerprints of field maps: order never matters, and a different map never encodes alike. */
class FingerprintPropertyTest {

  @Property(tries = 300)
  void fieldOrderNeverMatters(@ForAll("fields") Map<String, Object> fields, @ForAll long seed) {
    List<Map.Entry<String, Object>> entries = new ArrayList<>(fields.entrySet());
    Collections.shuffle(entries, new Random(seed));
    Map<String, Object> shuffled = new LinkedHashMap<>();
    entries.forEach(e -> shuffled.put(e.getKey(), e.getValue()));
    assertThat(Fingerprint.ofFields(shuffled)).isEqualTo(Fingerprint.ofFields(fields));
  }

  @Property(tries = 1000)
  void differentMapsHaveDifferentCanonicalForms(@ForAll("fields") Map<String, Object> a, @ForAll("fields") Map<String, Object> b) {
    Assume.that(!a.equals(b));
    // Canonical forms, not hashes: a SHA-256 collision is not what this looks for, an ambiguous
    // encoding is.
    assertThat(Fingerprint.canonical(a)).isNotEqualTo(Fingerprint.canonical(b));
  }

  /**
   * The near miss, made on purpose: one value replaced by its look-alike text (40 by "40", true by
   * "true", [a, b] by "[a, b]", a map by its toString). Random pairs of maps rarely differ this
   * little; an encoding that dropped kinds would give both one canonical form.
   */
  @Property(tries = 500)
  void aValueAndItsTextLookAlikeDiffer(@ForAll("fields") Map<String, Object> fields) {
    Assume.that(fields.values().stream().anyMatch(v -> !(v instanceof String)));
    String name = fields.entrySet().stream().filter(e -> !(e.getValue() instanceof String)).findFirst().orElseThrow().getKey();
    Map<String, Object> lookAlike = new LinkedHashMap<>(fields);
    lookAlike.put(name, String.valueOf(fields.get(name)));
    assertThat(Fingerprint.canonical(lookAlike)).isNotEqualTo(Fingerprint.canonical(fields));
    assertThat(Fingerprint.ofFields(lookAlike)).isNotEqualTo(Fingerprint.ofFields(fields));
  }

  /**
   * Small maps over a tiny alphabet rich in the encoding's own punctuation, with nested lists and
   * maps, so that near-misses are common.
   */
  @Provide
  Arbitrary<Map<String, Object>> fields() {
    Arbitrary<String> text = Arbitraries.strings().withChars('a', '1', '#', ':', '{', '[', 's', ',', '=').ofMaxLength(4);
    Arbitrary<Object> leaf = Arbitraries.oneOf(
        text.map(s -> (Object) s),
        Arbitraries.integers().between(-2, 12).map(i -> (Object) i),
        Arbitraries.of(true, false).map(b -> (Object) b));
    Arbitrary<Object> nested = Arbitraries.oneOf(
        leaf,
        leaf.list().ofMaxSize(3).map(l -> (Object) l),
        Arbitraries.maps(text, leaf).ofMaxSize(2).map(m -> (Object) m));
    return Arbitraries.maps(text, nested).ofMaxSize(4);
  }
}
