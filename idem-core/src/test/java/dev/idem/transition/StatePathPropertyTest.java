package dev.idem.transition;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.From;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.constraints.UniqueElements;

/**
 * {@link StatePath#classify} over every pair of states: on the path, side states, and no row. The
 * expected answer is computed from positions, independently of the class under test.
 */
class StatePathPropertyTest {

  @Property(tries = 300)
  void everyPairOfStatesIsClassifiedByWhereTheRowIs(
      @ForAll @Size(min = 1, max = 8) @UniqueElements List<@From("state") String> path,
      @ForAll @Size(max = 3) @UniqueElements List<@From("sideState") String> sides) {
    StatePath statePath = StatePath.of(path.toArray(String[]::new));
    List<String> all = new ArrayList<>(path);
    all.addAll(sides);
    List<String> currents = new ArrayList<>(all);
    currents.add(null); // no row

    for (String current : currents) {
      for (String target : all) {
        Outcome outcome = statePath.classify(current, target);
        assertThat(outcome).as("classify(%s, %s) on %s", current, target, statePath).isNotEqualTo(Outcome.APPLIED);
        assertThat(outcome).as("classify(%s, %s) on %s", current, target, statePath).isEqualTo(expected(path, current, target));
      }
    }
  }

  @Property(tries = 200)
  void aRepeatOfAnyForwardStepIsAlreadyDoneWhereverTheRowMovedOnTo(
      @ForAll @Size(min = 2, max = 8) @UniqueElements List<@From("state") String> path) {
    StatePath statePath = StatePath.of(path.toArray(String[]::new));
    for (int step = 1; step < path.size(); step++) {
      for (int now = 0; now < path.size(); now++) {
        Outcome outcome = statePath.classify(path.get(now), path.get(step));
        // At or past the step's target: the step happened. Before it: it did not, and saying
        // "done" would hide a lost step.
        assertThat(outcome).isEqualTo(now >= step ? Outcome.ALREADY_DONE : Outcome.CONFLICT);
      }
    }
  }

  private static Outcome expected(List<String> path, String current, String target) {
    if (current == null) {
      return Outcome.CONFLICT;
    }
    if (current.equals(target)) {
      return Outcome.ALREADY_DONE;
    }
    int at = path.indexOf(current);
    int goal = path.indexOf(target);
    return at >= 0 && goal >= 0 && at >= goal ? Outcome.ALREADY_DONE : Outcome.CONFLICT;
  }

  @Provide
  Arbitrary<String> state() {
    return Arbitraries.strings().withCharRange('A', 'H').ofLength(2);
  }

  /** Side states never collide with path states: they are lower-case. */
  @Provide
  Arbitrary<String> sideState() {
    return Arbitraries.strings().withCharRange('a', 'h').ofLength(2);
  }
}
