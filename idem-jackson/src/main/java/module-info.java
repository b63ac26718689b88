/** A JSON {@link dev.idem.result.Codec} on Jackson, for storing results that a repeat replays. */
module dev.idem.jackson {
  requires transitive dev.idem.core;
  requires transitive com.fasterxml.jackson.databind;

  exports dev.idem.jackson;
}
