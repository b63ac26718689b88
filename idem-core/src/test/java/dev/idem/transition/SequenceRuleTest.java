package dev.idem.transition;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class SequenceRuleTest {

  @Test
  void appliesOnlyWhatIsNewer() {
    assertThat(SequenceRule.shouldApply(0, 1)).isTrue(); // nothing applied yet
    assertThat(SequenceRule.shouldApply(3, 4)).isTrue();
    assertThat(SequenceRule.shouldApply(3, 5)).isTrue(); // a gap is accepted
    assertThat(SequenceRule.shouldApply(3, 3)).isFalse(); // a repeat
    assertThat(SequenceRule.shouldApply(3, 2)).isFalse(); // a late, older event
    assertThat(SequenceRule.outcome(3, 4)).isEqualTo(Outcome.APPLIED);
    assertThat(SequenceRule.outcome(3, 3)).isEqualTo(Outcome.ALREADY_DONE);
    assertThat(SequenceRule.outcome(3, 1)).isEqualTo(Outcome.ALREADY_DONE);
  }

  @Test
  void aStreamWithRepeatsAndReorderingAppliesEachNumberOnceAndNeverGoesBack() {
    long last = 0;
    List<Long> applied = new ArrayList<>();
    for (long seq : new long[] {1, 2, 2, 1, 4, 3, 4, 5, 5}) {
      if (SequenceRule.shouldApply(last, seq)) {
        applied.add(seq);
        last = seq;
      }
    }
    assertThat(applied).containsExactly(1L, 2L, 4L, 5L); // 3 came after 4 and is absorbed by it
    assertThat(last).isEqualTo(5);
  }

  @Test
  void numbersBelowTheRangeAreRefused() {
    assertThatThrownBy(() -> SequenceRule.shouldApply(0, 0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("seq must be 1 or more, was 0");
    assertThatThrownBy(() -> SequenceRule.shouldApply(-1, 5)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("lastApplied must be 0 (none) or more, was -1");
  }
}
