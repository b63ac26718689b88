package dev.idem.fence;

/**
 * A number handed out with every grant of a lease, strictly greater than every token granted
 * before for the same resource. The resource refuses a write carrying a token lower than the
 * highest it has seen, so a worker that paused past its lease cannot write after its successor.
 *
 * @param value 1 or more
 */
public record FencingToken(long value) implements Comparable<FencingToken> {

  /** The token of the first grant. */
  public static final FencingToken FIRST = new FencingToken(1);

  public FencingToken {
    if (value < 1) {
      throw new IllegalArgumentException("fencing token must be 1 or more, was " + value);
    }
  }

  /** The token of the next grant. */
  public FencingToken next() {
    return new FencingToken(Math.addExact(value, 1));
  }

  /** Whether this token may write where {@code highestSeen} is the highest token seen so far. */
  public boolean admits(long highestSeen) {
    return value >= highestSeen;
  }

  @Override
  public int compareTo(FencingToken other) {
    return Long.compare(value, other.value);
  }
}
