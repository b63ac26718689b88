package dev.idem;

/**
 * Base of every exception idem throws for a rule it enforces (a reused key, a stale fence, a result
 * that cannot be stored). Programming errors in arguments are {@link IllegalArgumentException}s
 * instead, thrown before anything is written.
 *
 * <p>A recognised repeat is never an {@code IdemException}: it is a normal return value.
 */
public class IdemException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** An exception with {@code message}. */
  public IdemException(String message) {
    super(message);
  }

  /** An exception with {@code message}, caused by {@code cause}. */
  public IdemException(String message, Throwable cause) {
    super(message, cause);
  }
}
