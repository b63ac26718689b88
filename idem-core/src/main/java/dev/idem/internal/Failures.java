package dev.idem.internal;

/**
 * Which failures of someone else's code (a listener, a publisher) idem passes on instead of
 * absorbing. Not an API.
 */
public final class Failures {
  private Failures() {}

  /**
   * Whether {@code t} means the JVM itself is in trouble (out of memory, an internal error), so
   * that going on would only hide it: a {@link VirtualMachineError} other than a {@link
   * StackOverflowError}. A stack overflow has unwound by the time it is caught, the JVM is fine,
   * and it is the fault of the code that recursed (a serializer, a listener): a failure of that code
   * like any other.
   */
  public static boolean isFatal(Throwable t) {
    return t instanceof VirtualMachineError && !(t instanceof StackOverflowError);
  }

  /** Throws {@code t} if it {@link #isFatal is fatal}; otherwise returns. */
  public static void rethrowIfFatal(Throwable t) {
    if (isFatal(t)) {
      throw (VirtualMachineError) t;
    }
  }
}
