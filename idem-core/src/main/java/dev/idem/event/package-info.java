/**
 * Events a guard emits (applied, replayed, in flight, mismatch, lease taken over, expired, the
 * outcome of a conditional write, a stale fencing token refused, a sequence number ignored) and
 * their listener.
 */
package dev.idem.event;
