package dev.idem.jdbc.internal;

import java.time.Duration;

/**
 * One instance at a time: runs work under a lease on a named resource (idem's {@code Leases},
 * wired in by {@code Idem}, so a tool uses a lease without depending on the lease package). Not
 * an API.
 */
@FunctionalInterface
public interface Alone {
  /**
   * Runs {@code work} if {@code resource} is granted to {@code holder} for {@code ttl} (database
   * clock), then gives it up; returns false without running it if another holder has a live lease.
   */
  boolean run(String resource, String holder, Duration ttl, Runnable work);

  /** For a context built without {@code Idem}: refuses, naming what is missing. */
  Alone NONE = (resource, holder, ttl, work) -> {
    throw new IllegalStateException("no leases wired into this context: build the tool from Idem");
  };
}
