package dev.idem.result;

import dev.idem.IdemException;

/**
 * A result could not be encoded for storage, or a stored one could not be decoded. When encoding
 * fails, the effect it belongs to was rolled back: nothing was committed for the key.
 */
public class CodecException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** A codec failure described by {@code message}, caused by what the codec threw. */
  public CodecException(String message, Throwable cause) {
    super(message, cause);
  }
}
