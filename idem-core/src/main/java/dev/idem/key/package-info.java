/**
 * Keys that name intents, their derivation across hops, and request fingerprints that catch a key
 * reused for a different request.
 */
package dev.idem.key;
