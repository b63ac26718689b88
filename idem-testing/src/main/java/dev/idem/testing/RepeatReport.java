package dev.idem.testing;

import java.util.List;

/**
 * What {@link Repeats#run()} found: one {@link Trial} per delivery (per writing commit for the
 * killing ones), each with its own fresh intent, its effects counted in the table, and the copies
 * that made them. {@link #toString()} is the text a failing test shows.
 *
 * @param effects the effect table and key column, e.g. {@code payments.order_id}
 * @param trials the trials, in the order they ran
 */
public record RepeatReport(String effects, List<Trial> trials) {
  /** Copies the list. */
  public RepeatReport {
    Require.present(effects, "effects");
    trials = List.copyOf(Require.present(trials, "trials"));
  }

  /**
   * One intent delivered one way.
   *
   * @param delivery how it was delivered
   * @param variant which trial of the delivery, e.g. {@code writing commit 2 of 2}; empty if one
   * @param intent the intent's business key, fresh for this trial
   * @param asserted whether {@link #assertOneEffectPerIntent} holds this trial to its property:
   *     every delivery within idem's guarantee, and those outside it you asked for with {@link
   *     Repeats#expectOneEffect}
   * @param passed whether the property held (always true when not asserted)
   * @param effects the intent's rows in the table after the trial
   * @param verdict the trial in one line, e.g. {@code 2 effects, want 1}
   * @param steps each copy (or burst of copies), in order
   */
  public record Trial(Delivery delivery, String variant, String intent, boolean asserted, boolean passed, long effects,
      String verdict, List<Step> steps) {
    /** Copies the list. */
    public Trial {
      steps = List.copyOf(steps);
    }
  }

  /**
   * One copy of the intent (or a burst of copies sent at once) and what the table held after it.
   *
   * @param copy which copy, e.g. {@code copy 2} or {@code 8 copies at once}
   * @param key the key it carried
   * @param outcome its attempts' outcomes, e.g. {@code 500 → 201 replayed}
   * @param effectsAfter the intent's rows in the table once it was over
   * @param extra the effects it added beyond the intent's one: the duplicates this copy made
   * @param note what else happened: the kill, the aging; empty if nothing
   */
  public record Step(String copy, String key, String outcome, long effectsAfter, long extra, String note) {}

  /** The asserted trials whose property did not hold. */
  public List<Trial> failures() {
    return trials.stream().filter(t -> !t.passed()).toList();
  }

  /**
   * Passes when every asserted trial left exactly one effect for its intent (and, for {@link
   * Delivery#OUT_OF_ORDER}, no message twice and the newest last).
   *
   * @throws AssertionError with this report as its message, naming each failing trial, its intent,
   *     and per copy its key, outcome and the effects after it
   */
  public void assertOneEffectPerIntent() {
    if (!failures().isEmpty()) {
      throw new AssertionError(toString());
    }
  }

  /**
   * The report as a test shows it: a summary line, then one line per trial ({@code FAIL}, {@code
   * ok}, or {@code --} for one outside the guarantee and not asserted), with the copies of every
   * trial that failed or was not asserted: per copy its key, its attempts' outcomes, the effects
   * after it and, marked {@code ← 1 extra}, the duplicates it made; below it, what was killed or
   * aged before it.
   */
  @Override
  public String toString() {
    StringBuilder s = new StringBuilder();
    long failed = failures().size();
    long asserted = trials.stream().filter(Trial::asserted).count();
    s.append("one effect per intent in ").append(effects).append(": ");
    s.append(asserted == 0 ? "nothing asserted" : failed == 0 ? (asserted == 1 ? "held in the one trial" : "held in all " + asserted + " trials")
        : failed + " of " + asserted + " trials failed");
    long outside = trials.size() - asserted;
    if (outside > 0) {
      s.append(asserted == 0 ? ", " : " (").append(outside).append(" outside idem's guarantee, not asserted").append(asserted == 0 ? "" : ")");
    }
    for (Trial t : trials) {
      s.append('\n').append(!t.asserted() ? "--   " : t.passed() ? "ok   " : "FAIL ");
      s.append(t.delivery());
      if (!t.variant().isEmpty()) {
        s.append(" (").append(t.variant()).append(')');
      }
      s.append(", intent ").append(t.intent()).append(": ").append(t.verdict());
      if (!t.passed() || !t.asserted()) {
        for (Step step : t.steps()) {
          s.append("\n       ").append(step.copy()).append(", key ").append(step.key()).append(": ").append(step.outcome())
              .append(" → ").append(step.effectsAfter()).append(step.effectsAfter() == 1 ? " effect" : " effects");
          if (step.extra() > 0) {
            s.append(" ← ").append(step.extra()).append(" extra");
          }
          if (!step.note().isEmpty()) {
            s.append("\n         ").append(step.note());
          }
        }
      }
    }
    return s.toString();
  }
}
