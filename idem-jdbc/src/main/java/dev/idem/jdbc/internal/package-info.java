/** Helpers shared by idem-jdbc's tools. Not an API: not exported by the module. */
package dev.idem.jdbc.internal;
