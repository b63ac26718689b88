package dev.idem.fence;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import net.jqwik.api.constraints.Size;

/** The fencing rule over arbitrary sequences of tokens. */
class FencePropertyTest {

  @Property(tries = 500)
  void aFenceNeverAcceptsATokenBelowTheHighestSeen(
      @ForAll @Size(min = 1, max = 50) List<@LongRange(min = 1, max = 40) Long> tokens) {
    Fence fence = new Fence("r");
    long highest = 0;
    for (long token : tokens) {
      if (token >= highest) {
        fence.check(new FencingToken(token)); // equal or higher: admitted
        highest = token;
      } else {
        long before = highest;
        assertThatThrownBy(() -> fence.check(new FencingToken(token)))
            .isInstanceOf(StaleFenceException.class)
            .satisfies(e -> assertThat(((StaleFenceException) e).highest()).isEqualTo(before));
      }
      assertThat(fence.highest()).isEqualTo(highest);
    }
    assertThat(fence.highest()).isEqualTo(tokens.stream().mapToLong(Long::longValue).max().orElseThrow());
  }

  @Property(tries = 300)
  void anEqualTokenIsAlwaysAdmitted(@ForAll @LongRange(min = 1) long token) {
    Fence fence = new Fence("r");
    fence.check(new FencingToken(token));
    fence.check(new FencingToken(token));
    assertThat(fence.highest()).isEqualTo(token);
  }

  @Property(tries = 300)
  void nextIsAlwaysAdmittedAndTheOldTokenNeverAgain(@ForAll @LongRange(min = 1, max = Long.MAX_VALUE - 1) long token) {
    Fence fence = new Fence("r");
    FencingToken old = new FencingToken(token);
    fence.check(old);
    fence.check(old.next());
    assertThatThrownBy(() -> fence.check(old)).isInstanceOf(StaleFenceException.class);
  }
}
