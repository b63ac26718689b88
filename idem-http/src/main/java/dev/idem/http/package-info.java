/**
 * The incoming HTTP hop: the {@code Idempotency-Key} servlet filter
 * (draft-ietf-httpapi-idempotency-key-header), which stores a guarded route's response with the
 * client's key and replays it to every repeat.
 */
package dev.idem.http;
