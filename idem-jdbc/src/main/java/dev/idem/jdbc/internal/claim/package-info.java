/**
 * The claim engine: the one implementation of claim-first under a unique key, shared by the
 * executor's local effects and the inbox ({@link dev.idem.jdbc.internal.claim.Claims}), the one of the
 * leased, fenced claim of effects no transaction covers, shared by the executor's external effects
 * and the notifications ({@link dev.idem.jdbc.internal.claim.ExternalClaims}), and the SQL of the claim
 * tables. Not an API: not exported by the module.
 */
package dev.idem.jdbc.internal.claim;
