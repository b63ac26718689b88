/**
 * The helpers idem-core's public packages use themselves (argument checks, SHA-256), shared with
 * idem's own modules. Not an API: may change in any release.
 *
 * <p>A package of its own, depending on the JDK only, so that {@code dev.idem.key}, {@code
 * dev.idem.window} and {@code dev.idem.result} can use it while {@code dev.idem.internal} (the
 * event dispatch, which uses those packages' types) sits above them: no package cycle.
 */
package dev.idem.internal.base;
