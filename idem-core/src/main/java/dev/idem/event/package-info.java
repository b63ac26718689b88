/** Events a guard emits (applied, replayed, in flight, mismatch, lease taken over, expired) and their listener. */
package dev.idem.event;
