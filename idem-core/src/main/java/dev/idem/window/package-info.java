/** How long repeats are remembered: dedupe windows sized by the slowest path a repeat can take. */
package dev.idem.window;
