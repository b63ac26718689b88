package dev.idem.key;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Instant;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Assume;
import net.jqwik.api.ForAll;
import net.jqwik.api.From;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.constraints.UniqueElements;

/** The derivation rules of the seed's step 6, as properties over generated keys and steps. */
class KeysPropertyTest {

  @Property(tries = 500)
  void derivationIsDeterministic(@ForAll("keyText") String scope, @ForAll("keyText") String parent,
      @ForAll("keyText") String step, @ForAll @IntRange(min = 1, max = 1_000_000) int n) {
    IdempotencyKey p = IdempotencyKey.of(scope, parent);
    // A fresh, equal parent (another machine, after a crash) derives the same keys.
    IdempotencyKey again = IdempotencyKey.of(new String(scope.toCharArray()), new String(parent.toCharArray()));
    assertThat(Keys.child(p, step)).isEqualTo(Keys.child(again, step));
    assertThat(Keys.attempt(p, n)).isEqualTo(Keys.attempt(again, n));
    assertThat(Keys.child(p, step).scope()).isEqualTo(scope);
  }

  @Property(tries = 300)
  void distinctStepsOfOneIntentNeverShareAKey(@ForAll("keyText") String parent,
      @ForAll @Size(min = 2, max = 20) @UniqueElements List<@From("keyText") String> steps) {
    IdempotencyKey p = IdempotencyKey.of("scope", parent);
    Set<IdempotencyKey> derived = new HashSet<>();
    for (String step : steps) {
      derived.add(Keys.child(p, step));
    }
    assertThat(derived).hasSameSizeAs(steps);
  }

  @Property(tries = 500)
  void distinctParentAndStepPairsNeverShareAKey(@ForAll("slashy") String parentA, @ForAll("slashy") String stepA,
      @ForAll("slashy") String parentB, @ForAll("slashy") String stepB) {
    Assume.that(!(parentA.equals(parentB) && stepA.equals(stepB)));
    assertThat(Keys.child(IdempotencyKey.of("s", parentA), stepA))
        .isNotEqualTo(Keys.child(IdempotencyKey.of("s", parentB), stepB));
  }

  /**
   * The near miss, made on purpose: one text cut at two different slashes into (parent, step).
   * Hashing {@code parent + "/" + step} alone would give both cuts one key.
   */
  @Property(tries = 500)
  void cuttingOneTextAtTwoSlashesGivesTwoKeys(
      @ForAll @Size(min = 3, max = 6) List<@From("segment") String> segments,
      @ForAll @IntRange(min = 1, max = 5) int cutA, @ForAll @IntRange(min = 1, max = 5) int cutB) {
    Assume.that(cutA < segments.size() && cutB < segments.size() && cutA != cutB);
    IdempotencyKey a = Keys.child(IdempotencyKey.of("s", join(segments.subList(0, cutA))), join(segments.subList(cutA, segments.size())));
    IdempotencyKey b = Keys.child(IdempotencyKey.of("s", join(segments.subList(0, cutB))), join(segments.subList(cutB, segments.size())));
    assertThat(a).isNotEqualTo(b);
  }

  private static String join(List<String> segments) {
    return String.join("/", segments);
  }

  @Property(tries = 500)
  void attemptsNAndMDiffer(@ForAll("keyText") String parent, @ForAll @IntRange(min = 1) int n,
      @ForAll @IntRange(min = 1) int m) {
    Assume.that(n != m);
    IdempotencyKey p = IdempotencyKey.of("scope", parent);
    assertThat(Keys.attempt(p, n)).isNotEqualTo(Keys.attempt(p, m));
  }

  @Property(tries = 300)
  void aScheduledRunDependsOnlyOnTheSlot(@ForAll @IntRange(min = 0, max = 2_000_000_000) int epochSecond,
      @ForAll @IntRange(min = 1, max = 999_999_999) int startedLateByNanos) {
    Instant slot = Instant.ofEpochSecond(epochSecond);
    assertThat(Keys.scheduledRun("s", "job", slot)).isEqualTo(Keys.scheduledRun("s", "job", Instant.ofEpochSecond(epochSecond)));
    assertThatThrownBy(() -> Keys.scheduledRun("s", "job", slot.plusNanos(startedLateByNanos)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Provide
  Arbitrary<String> keyText() {
    return Arbitraries.strings().withCharRange('!', '~').ofMinLength(1).ofMaxLength(40);
  }

  @Provide
  Arbitrary<String> segment() {
    return Arbitraries.strings().withChars('a', 'b').ofMinLength(1).ofMaxLength(3);
  }

  /** Short texts rich in '/', where an ambiguous split between parent and step would show. */
  @Provide
  Arbitrary<String> slashy() {
    return Arbitraries.strings().withChars('a', 'b', '/').ofMinLength(1).ofMaxLength(4);
  }
}
