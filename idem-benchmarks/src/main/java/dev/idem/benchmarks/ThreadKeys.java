package dev.idem.benchmarks;

import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * A thread's own counter: new keys never collide across threads or runs, and reads spread over the
 * rows from a random start.
 */
@State(Scope.Thread)
public class ThreadKeys {
  private String prefix;
  private long n;

  @Setup(Level.Trial)
  public void start() {
    prefix = UUID.randomUUID().toString();
    n = ThreadLocalRandom.current().nextInt(1 << 20);
  }

  /** A key no other thread or run makes. */
  public String newKey() {
    return prefix + "-" + n++;
  }

  /** The next index below {@code bound}, in turn. */
  public int nextIndex(int bound) {
    return (int) (n++ % bound);
  }
}
