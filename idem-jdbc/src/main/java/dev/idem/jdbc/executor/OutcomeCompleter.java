package dev.idem.jdbc.executor;

import dev.idem.event.IdemEvent;
import dev.idem.fence.FencingToken;
import dev.idem.internal.Events;
import dev.idem.internal.base.Require;
import dev.idem.jdbc.internal.Context;
import dev.idem.jdbc.internal.DbTime;
import dev.idem.jdbc.internal.KeyTable;
import dev.idem.jdbc.internal.claim.Binds;
import dev.idem.jdbc.internal.claim.ExternalClaims;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.key.Keys;
import dev.idem.result.Codec;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.impl.DSL;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Finishes the unknown outcomes of one external effect by itself, with its {@link Resolver}: the
 * keys whose call never recorded its result (in flight, lease over, by the database clock) are
 * looked up at the provider by their call key, then completed with the result found there or,
 * when the provider has no record of the call, released so that the next repeat calls again.
 * Built by {@link IdempotentExecutor#completer}; run {@link #runOnce()} on a schedule (the Spring
 * Boot starter can).
 *
 * <pre>{@code
 * OutcomeCompleter completer = payments.completer(Codec.utf8(), attempt -> provider.findCharge(attempt.callKey()), "shop");
 * CompleterRun run = completer.runOnce(); // every minute
 * }</pre>
 *
 * <h2>Guarantees</h2>
 *
 * <ul>
 *   <li><b>Fenced.</b> Each key is first taken over as a repeat would take it over: fence + 1 and
 *       the executor's lease, only if it is still in flight under the fence listed and its lease
 *       is over. A live holder is never overruled, the attempt taken over can no longer record
 *       (its token is stale), and of two completers (or a completer and a repeat) racing for one
 *       key, one takes it and the other skips it. The record and the release are fenced by the new
 *       token.
 *   <li><b>Bounded.</b> At most {@code maxKeys} keys per run ({@link #bounds}), the ones stuck longest
 *       first; no key is begun after {@code runFor}; each look-up runs under the
 *       executor's lease, so one that outlives it loses the key to whoever takes it over next.
 *   <li><b>One instance at a time.</b> A run holds an idem lease ({@code Leases}) on {@code
 *       "idem.completer:" + the executor's name} for {@code runFor} plus the executor's lease,
 *       and gives it up when done; a run that finds it held does nothing and says so ({@link CompleterRun#ran()}).
 *   <li>Only the keys of the scopes given: a resolver knows one provider.
 *       Keys already past their window (released, by an operator or a run) are left to their
 *       next repeat, which re-claims them and asks its own resolver.
 * </ul>
 *
 * <p>Each finished or released key emits {@link IdemEvent.OperatorAction} (source {@code
 * "completer"}, action {@code complete} or {@code release}); a run that changed anything logs one
 * INFO line on logger {@code dev.idem.completer}, a resolver that threw one WARN line.
 *
 * <p>Not guaranteed: that the resolver tells the truth (idem cannot check the provider); that a
 * released key's provider call did not land after the look-up (send the call key, so the
 * provider dedupes the next call). The listing scans the key table: run it every minute, not in
 * a loop.
 *
 * <p>Thread-safe; a run that overlaps another on the same instance finds the lease held.
 */
public final class OutcomeCompleter {
  /** The most keys one run takes. */
  public static final int MAX_KEYS = 10_000;
  /** The longest {@code runFor} of {@link #bounds}. */
  public static final Duration MAX_RUN = Duration.ofHours(1);

  private static final Logger LOG = LoggerFactory.getLogger("dev.idem.completer");
  private static final Field<OffsetDateTime> NOW = DbTime.clock();

  /** The resolver and the codec, with the types erased: the result, encoded, or empty. */
  @FunctionalInterface
  private interface LookUp {
    Optional<byte[]> find(ExternalAttempt attempt) throws Exception;
  }

  /** What a look-up found when the codec stores nothing: recorded as the executor's phase 3 does, as null. */
  private static final byte[] NOTHING = new byte[0];

  private record Stuck(IdempotencyKey key, long fence) {}

  private final Context context;
  private final ExternalClaims external;
  private final Duration keyLease;
  private final String name;
  private final Events events;
  private final LookUp lookUp;
  private final List<String> scopes;
  private final int maxKeys;
  private final Duration runFor;
  private final Duration leaseTtl;
  private final String resource;
  private final String holder = "completer-" + UUID.randomUUID();
  private final String listSql;
  private final String releaseSql;

  /** The defaults of {@link #runOnce()}: at most this many keys per run. */
  public static final int DEFAULT_MAX_KEYS = 100;
  /** The defaults of {@link #runOnce()}: no key begun after this. */
  public static final Duration DEFAULT_RUN_FOR = Duration.ofMinutes(1);

  private OutcomeCompleter(Context context, ExternalClaims external, Duration keyLease, String name, LookUp lookUp,
      List<String> scopes, int maxKeys, Duration runFor) {
    this.context = context;
    this.external = external;
    this.keyLease = keyLease;
    this.name = name;
    this.events = Events.to(context.listener(), "completer");
    this.lookUp = lookUp;
    this.scopes = scopes;
    this.maxKeys = maxKeys;
    this.runFor = runFor;
    this.leaseTtl = runFor.plus(keyLease);
    this.resource = "idem.completer:" + name;
    DSLContext d = context.dsl();
    List<Field<String>> scopeParams = new ArrayList<>();
    scopes.forEach(s -> scopeParams.add(DSL.val((String) null, KeyTable.SCOPE)));
    // Stuck (in flight, lease over) and still within the window: a key past it was released and
    // belongs to its next repeat. Oldest lease first: the ones waiting longest are finished first.
    Condition stuck = KeyTable.STATE.eq(DSL.inline(KeyTable.IN_FLIGHT)).and(KeyTable.LEASE_EXPIRES_AT.le(NOW))
        .and(KeyTable.EXPIRES_AT.gt(NOW)).and(KeyTable.SCOPE.in(scopeParams));
    this.listSql = d.render(d.select(KeyTable.SCOPE, KeyTable.KEY, KeyTable.FENCE).from(KeyTable.T).where(stuck)
        .orderBy(KeyTable.LEASE_EXPIRES_AT).limit(DSL.val((Integer) null, Integer.class)));
    // Operations.release's write, fenced by the completer's own token (its lease is live).
    this.releaseSql = d.render(d.update(KeyTable.T).set(KeyTable.LEASE_EXPIRES_AT, NOW).set(KeyTable.EXPIRES_AT, NOW)
        .where(KeyTable.SCOPE.eq(DSL.val((String) null, KeyTable.SCOPE)))
        .and(KeyTable.KEY.eq(DSL.val((String) null, KeyTable.KEY)))
        .and(KeyTable.FENCE.eq(DSL.val((Long) null, KeyTable.FENCE)))
        .and(KeyTable.STATE.eq(DSL.inline(KeyTable.IN_FLIGHT))));
  }

  /** Built by {@link IdempotentExecutor#completer}: checks the scopes, erases the result type. */
  static <T, Y extends Exception> OutcomeCompleter of(Context context, ExternalClaims external, Duration keyLease,
      String name, Codec<T> codec, Resolver<T, Y> resolver, String... scopes) {
    Require.notNull(codec, "codec");
    Require.notNull(resolver, "resolver");
    if (scopes == null || scopes.length == 0) {
      throw new IllegalArgumentException("scopes must name at least one scope: the keys this resolver knows");
    }
    for (String scope : scopes) {
      IdempotencyKey.check("scope", scope);
    }
    IdempotencyKey.check("completer's lease", "idem.completer:" + name);
    LookUp lookUp = attempt -> {
      Optional<T> known = resolver.lookUp(attempt);
      if (known == null) {
        throw new IllegalStateException("resolver returned null for " + attempt.key() + "; return Optional.empty()"
            + " when the provider has no record of the call");
      }
      if (known.isEmpty()) {
        return Optional.empty();
      }
      return Optional.of(codec.storesNothing() ? NOTHING : codec.encode(known.get()));
    };
    return new OutcomeCompleter(context, external, keyLease, name, lookUp, List.of(scopes.clone()), DEFAULT_MAX_KEYS,
        DEFAULT_RUN_FOR);
  }

  /**
   * This completer with other bounds: at most {@code maxKeys} keys per run (1 to {@value
   * #MAX_KEYS}; default {@value #DEFAULT_MAX_KEYS}) and no key begun after {@code runFor}
   * (positive, at most {@link #MAX_RUN}; default 1 minute).
   *
   * @throws IllegalArgumentException naming the bound out of range
   */
  public OutcomeCompleter bounds(int maxKeys, Duration runFor) {
    if (maxKeys < 1 || maxKeys > MAX_KEYS) {
      throw new IllegalArgumentException("maxKeys must be within 1 and " + MAX_KEYS + ", was " + maxKeys);
    }
    Require.atMost(Require.positive(runFor, "runFor"), MAX_RUN, "runFor", "a run holds the completer's lease");
    return new OutcomeCompleter(context, external, keyLease, name, lookUp, scopes, maxKeys, runFor);
  }

  /**
   * One run: takes the completer's lease (or returns {@link CompleterRun#ran()} false at once),
   * lists up to {@code maxKeys} stuck keys of its scopes, and finishes or releases each as the
   * resolver answers, until the list or {@code runFor} is over ({@link #bounds}).
   *
   * @throws org.jooq.exception.DataAccessException if the database failed the listing, a takeover
   *     or a release (the keys done before it stay done; a record that failed is finished in the
   *     background as the executor's own phase 3 is)
   */
  public CompleterRun runOnce() {
    long started = System.nanoTime();
    int[] counts = new int[4]; // finished, released, still unknown, skipped
    boolean ran = context.alone().run(resource, holder, leaseTtl, () -> completeStuck(started, counts));
    CompleterRun run = new CompleterRunValue(ran, counts[0], counts[1], counts[2], counts[3]);
    if (counts[0] + counts[1] + counts[2] + counts[3] > 0) {
      LOG.info("completer {} of scopes {}: {} finished, {} released, {} still unknown, {} skipped", resource, scopes,
          counts[0], counts[1], counts[2], counts[3]);
    }
    return run;
  }

  private void completeStuck(long started, int[] counts) {
    List<Stuck> stuck = list();
    long deadline = started + runFor.toNanos();
    for (int i = 0; i < stuck.size(); i++) {
      if (System.nanoTime() - deadline >= 0) {
        counts[2] += stuck.size() - i; // not begun: still unknown, for the next run
        return;
      }
      counts[complete(stuck.get(i))]++;
    }
  }

  private List<Stuck> list() {
    return context.autoCommit("list the stuck keys for the completer", c -> {
      List<Stuck> out = new ArrayList<>();
      try (PreparedStatement ps = c.prepareStatement(listSql)) {
        int p = 1;
        for (String scope : scopes) {
          ps.setString(p++, scope);
        }
        ps.setInt(p, maxKeys);
        try (ResultSet rs = ps.executeQuery()) {
          while (rs.next()) {
            out.add(new Stuck(IdempotencyKey.of(rs.getString(1), rs.getString(2)), rs.getLong(3)));
          }
        }
      }
      return out;
    });
  }

  /** Finishes one key; returns the index of the count it adds to. */
  private int complete(Stuck stuck) {
    IdempotencyKey key = stuck.key();
    IdempotencyKey callKey = Keys.child(key, "external"); // the call key every attempt of the key sent
    Binds binds = new Binds(key, Fingerprint.EMPTY);
    binds.callKey = callKey.value();
    Long fence = external.takeOver(binds, stuck.fence());
    if (fence == null) {
      return 3; // a live holder, another completer, or completed meanwhile: not ours
    }
    Optional<byte[]> found;
    try {
      found = lookUp.find(new ExternalAttemptValue(key, callKey, new FencingToken(fence), true));
    } catch (Exception e) {
      // Unknown still: end our lease at once, so a repeat (or the next run) need not wait it out.
      external.endLease(binds, fence, e);
      LOG.warn("completer {}: the resolver failed for {} (fence {}), left unknown: {}", resource, key, fence, e.toString());
      return 2;
    }
    if (found.isPresent()) {
      byte[] result = found.get() == NOTHING ? null : found.get();
      if (external.record(binds.result(result), fence) == null) {
        return 3;
      }
      events.operatorAction("complete", key + " fence " + fence, 1);
      return 0;
    }
    int rows = context.autoCommitOnce("release " + key, c -> {
      try (PreparedStatement ps = c.prepareStatement(releaseSql)) {
        ps.setString(1, key.scope());
        ps.setString(2, key.value());
        ps.setLong(3, fence);
        return ps.executeUpdate();
      }
    });
    if (rows == 0) {
      return 3;
    }
    events.operatorAction("release", key + " fence " + fence, 1);
    return 1;
  }
}
