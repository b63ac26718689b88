/**
 * Conditional writes: the outcome of a guarded step ({@link dev.idem.transition.Outcome}), the
 * forward path that classifies zero rows ({@link dev.idem.transition.StatePath}), and the
 * per-entity sequence rule.
 */
package dev.idem.transition;
