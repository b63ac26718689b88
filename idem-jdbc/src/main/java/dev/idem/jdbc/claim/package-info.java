/**
 * The claim engine: the one implementation of claim-first under a unique key, shared by the
 * executor's local effects and the inbox, and the SQL of the claim tables. Not an API: not exported
 * by the module.
 */
package dev.idem.jdbc.claim;
