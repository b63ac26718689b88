package dev.idem.jdbc;

/**
 * When a local guard (the executor's {@code execute}, the inbox's {@code receive}) writes its claim
 * row, relative to your effect, in a transaction idem owns. Both orders commit the claim and the
 * effect in one transaction, so both guarantee the same thing about what is <em>committed</em>: at
 * most one effect per key, and every repeat answered with the first outcome. They differ in what a
 * repeat costs and whether your callback runs for it.
 *
 * <p>A guard that joins a transaction of yours (given a {@code Connection}, or inside {@link
 * Idem#inTransaction}) always claims {@link #BEFORE_EFFECT}: it cannot put anything in a commit it
 * does not own.
 */
public enum ClaimOrder {

  /**
   * The seed's rule, and the default: insert the key first, under its unique index, then run the
   * effect. A copy that arrives while the first runs blocks on the key before it runs anything; a
   * copy that arrives later is answered from the key row. <b>A recognised repeat never runs your
   * callback.</b> Costs one round trip more than the effect alone: claim with {@code BEGIN}, the
   * effect, the result with {@code COMMIT}.
   */
  BEFORE_EFFECT,

  /**
   * Run the effect first, then insert the key row, already completed and with its result, in the
   * same round trip as {@code COMMIT}. A new key costs what the bare effect costs in round trips
   * (two: the effect with {@code BEGIN}, then key row and {@code COMMIT}); the claim is still one
   * step under the unique index, and a copy whose key row conflicts is rolled back whole, effect
   * included, and answered from the winner's row.
   *
   * <p>What it changes: a repeat the guard does not recognise beforehand (it reads first only keys
   * this process handled lately) <b>runs your callback, which is then rolled back</b>; so does a
   * copy racing the first. Only what the callback did through the transaction is undone. A repeat
   * whose callback fails because the first copy's effect is there (a unique constraint of yours,
   * a balance already debited) is still answered as a repeat, not with that failure, once that copy
   * has committed (a callback that fails on its rows without waiting for them, with {@code NOWAIT}
   * or a timeout of yours, fails as it did). Choose it for
   * effects that only write through the transaction and where repeats are rare; keep {@link
   * #BEFORE_EFFECT} when a callback is expensive, holds locks a repeat would wait on, or does
   * anything outside the transaction (which a local effect must not do anyway).
   */
  AT_COMMIT
}
