package dev.idem.jdbc.internal;

import java.lang.reflect.Method;

/** What a piece of work allocates, for the tests that measure idem's memory. */
public final class AllocatedBytes {
  private AllocatedBytes() {}

  /**
   * Bytes allocated by this thread while {@code work} ran, by HotSpot's counter ({@code
   * com.sun.management.ThreadMXBean}, called reflectively: the tests compile inside module
   * dev.idem.jdbc, which does not read jdk.management).
   */
  public static long of(Runnable work) {
    try {
      Object threads = Class.forName("java.lang.management.ManagementFactory").getMethod("getThreadMXBean").invoke(null);
      Method counter = Class.forName("com.sun.management.ThreadMXBean").getMethod("getCurrentThreadAllocatedBytes");
      long before = (long) counter.invoke(threads);
      work.run();
      return (long) counter.invoke(threads) - before;
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("a HotSpot JVM counts each thread's allocated bytes", e);
    }
  }
}
