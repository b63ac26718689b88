package dev.idem.fence;

import dev.idem.IdemException;

/**
 * A write carried a fencing token lower than the highest the resource has seen: its writer lost
 * its lease and someone else holds (or held) the right to act. The write was refused and left
 * nothing behind. The stale writer should stop; retrying with the same token can never succeed.
 */
public class StaleFenceException extends IdemException {
  private static final long serialVersionUID = 1L;

  private final String resource;
  private final long token;
  private final long highest;

  /** {@code token} was refused on {@code resource}, which has seen {@code highest} (0 if unknown). */
  public StaleFenceException(String resource, long token, long highest) {
    super("write to " + resource + " with fencing token " + token + " refused: "
        + (highest > token ? "token " + highest : "a higher token")
        + " was granted since, so this writer's lease has ended");
    this.resource = resource;
    this.token = token;
    this.highest = highest;
  }

  /** What the refused write was to, e.g. a lease's resource or {@code "<table>/<id>"}. */
  public String resource() {
    return resource;
  }

  /** The refused token. */
  public long token() {
    return token;
  }

  /** The highest token seen, greater than {@link #token()}; 0 if the store could not tell. */
  public long highest() {
    return highest;
  }
}
