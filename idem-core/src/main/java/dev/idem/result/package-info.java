/** What a recognised repeat gets back, and the codecs that store first results for replay. */
package dev.idem.result;
