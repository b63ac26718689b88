/** Helpers shared by idem's own modules. Not an API: may change in any release. */
package dev.idem.internal;
