package dev.idem.transition;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The forward path of a state machine, e.g. {@code PLACED → PACKED → SHIPPED → DELIVERED}, used to
 * tell what "zero rows matched" meant for a conditional step {@code from → to}.
 *
 * <p>Rule ({@link #classify}): the row is at the target, or on the path at or past it →
 * {@link Outcome#ALREADY_DONE}; anywhere else (a side state such as {@code CANCELLED}, a step that
 * arrived before the one it follows, or no row at all) → {@link Outcome#CONFLICT}. A conflict is
 * never reported as success, and a repeat never as an error.
 *
 * <p>Guarantees: {@link #classify} never answers {@link Outcome#APPLIED} (only the write that
 * matched a row may say that), and is a pure function of the path and its two arguments. A path is
 * immutable and safe to share between threads.
 *
 * <p>Does not guarantee: that a step is conditional. The caller's write must carry the guard
 * ({@code WHERE status = :from}); a blind write can move a delivered order back to {@code PACKED},
 * and no classification afterwards can undo that. Nor that the path is the right one for your domain. A state that can be left
 * and re-entered (a loop) is not a forward path; model it with a version column instead.
 */
public final class StatePath {
  private final List<String> states;
  private final Map<String, Integer> index;

  private StatePath(List<String> states) {
    this.states = states;
    Map<String, Integer> positions = new HashMap<>();
    for (int i = 0; i < states.size(); i++) {
      positions.put(states.get(i), i);
    }
    this.index = Map.copyOf(positions); // immutable, so a shared path is safe across threads
  }

  /**
   * A path through the given states, in forward order.
   *
   * @throws IllegalArgumentException if there are none, or one is null, blank or repeated
   */
  public static StatePath of(String... states) {
    if (states == null || states.length == 0) {
      throw new IllegalArgumentException("a state path needs at least one state");
    }
    for (int i = 0; i < states.length; i++) {
      if (states[i] == null) {
        throw new IllegalArgumentException("state at position " + i + " is null");
      }
    }
    List<String> list = List.of(states.clone());
    for (int i = 0; i < list.size(); i++) {
      if (list.get(i).isBlank()) {
        throw new IllegalArgumentException("state at position " + i + " is blank");
      }
      if (list.indexOf(list.get(i)) != i) {
        throw new IllegalArgumentException("state " + list.get(i) + " appears twice on the path " + list);
      }
    }
    return new StatePath(list);
  }

  /** The states, in forward order. */
  public List<String> states() {
    return states;
  }

  /** Whether {@code state} is on the forward path. */
  public boolean contains(String state) {
    return index.containsKey(state);
  }

  /**
   * Classifies a step to {@code target} that matched zero rows, by where the row is now.
   *
   * @param current the row's state now, or {@code null} if there is no row
   * @param target the state the step leads to; on the path, or a side state (then only a row
   *     already in it is {@link Outcome#ALREADY_DONE})
   * @return {@link Outcome#ALREADY_DONE} or {@link Outcome#CONFLICT}, never {@link Outcome#APPLIED}
   */
  public Outcome classify(String current, String target) {
    if (target == null) {
      throw new IllegalArgumentException("target state must not be null");
    }
    if (current == null) {
      return Outcome.CONFLICT;
    }
    if (current.equals(target)) {
      return Outcome.ALREADY_DONE;
    }
    Integer at = index.get(current);
    Integer goal = index.get(target);
    if (at != null && goal != null && at >= goal) {
      return Outcome.ALREADY_DONE;
    }
    return Outcome.CONFLICT;
  }

  /** Two paths are equal when they list the same states in the same order. */
  @Override
  public boolean equals(Object other) {
    return other instanceof StatePath path && path.states.equals(states);
  }

  @Override
  public int hashCode() {
    return states.hashCode();
  }

  @Override
  public String toString() {
    return String.join(" → ", states);
  }
}
