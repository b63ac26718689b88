/**
 * The root of idem's API: the base exception. Each concept has its own package: {@code key}
 * (intent keys, derivation, fingerprints), {@code transition} (conditional writes and their
 * outcome), {@code fence} (fencing tokens), {@code window} (how long a repeat is remembered),
 * {@code result} (what a repeat gets back, codecs) and {@code event} (listeners).
 */
package dev.idem;
