package dev.idem.spring.boot;

import dev.idem.jdbc.ops.Operations;
import dev.idem.key.IdempotencyKey;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;
import org.springframework.lang.Nullable;

/**
 * {@code /actuator/idem}: idem's operator's view ({@link Operations}).
 *
 * <p>Read ({@code GET}): the stuck keys (unknown outcomes) and their count, the parked outbox
 * messages and the outbox's counts, at most {@value #LIMIT} of each list, and this instance's last
 * fingerprint mismatches (the HTTP 422s; in memory, per instance); with {@code idem.checks.enabled},
 * this instance's last run of the scheduled checks under {@code checks} (its database time, lease
 * token, counts and examples per check, and whether another instance has run since). Write ({@code POST
 * /actuator/idem/{action}}, one operation selected by path, since an endpoint maps one write per
 * path): {@code redrive} ({@code id}), {@code redriveTopic} ({@code topic}), {@code redriveAll},
 * {@code release} ({@code scope}, {@code key}, {@code fence}) and {@code resolve} (the same and
 * {@code result}, stored as its UTF-8 bytes: the form a JSON or text codec reads). Each answers the
 * rows it changed; each is the {@link Operations} action, so it emits the operator event and logs.
 *
 * <p>Not exposed over HTTP unless the application exposes it ({@code
 * management.endpoints.web.exposure.include=idem}); secure it as any write endpoint.
 */
@Endpoint(id = "idem")
public class IdemOperationsEndpoint {
  /** The most rows each list of the read shows. */
  static final int LIMIT = 100;

  private final Operations operations;
  private final RecentMismatches mismatches;
  private final ObjectProvider<IdemChecks> checks;

  IdemOperationsEndpoint(Operations operations, RecentMismatches mismatches, ObjectProvider<IdemChecks> checks) {
    this.operations = operations;
    this.mismatches = mismatches;
    this.checks = checks;
  }

  /**
   * Stuck keys, unknown outcomes, parked messages and outbox stats, each read by its own statement;
   * recent mismatches; the scheduled checks' last run here (from memory, no query).
   */
  @ReadOperation
  public Map<String, Object> view() {
    Map<String, Object> view = new LinkedHashMap<>();
    view.put("unknownOutcomes", operations.unknownOutcomes());
    view.put("stuckKeys", operations.stuckKeys(LIMIT));
    view.put("outbox", operations.outboxStats());
    view.put("parked", operations.parked(LIMIT));
    view.put("recentMismatches", mismatches.list());
    IdemChecks scheduled = checks.getIfAvailable();
    if (scheduled != null) {
      view.put("checks", scheduled.view());
    }
    return view;
  }

  /**
   * One operator action, selected by {@code action}; answers {@code action} and {@code rows}.
   *
   * @throws IllegalArgumentException for an unknown action or a missing argument (answered 400)
   */
  @WriteOperation
  public Map<String, Object> act(@Selector String action, @Nullable String id, @Nullable String topic, @Nullable String scope,
      @Nullable String key, @Nullable Long fence, @Nullable String result) {
    long rows = switch (action) {
      case "redrive" -> operations.redrive(id == null ? null : UUID.fromString(id));
      case "redriveTopic" -> operations.redriveTopic(topic);
      case "redriveAll" -> operations.redriveAll();
      case "release" -> operations.release(key(scope, key), fence(fence)) ? 1 : 0;
      case "resolve" -> operations.resolve(key(scope, key), fence(fence),
          result == null ? null : result.getBytes(StandardCharsets.UTF_8)) ? 1 : 0;
      default -> throw new IllegalArgumentException("unknown action '" + action
          + "': redrive, redriveTopic, redriveAll, release or resolve");
    };
    return Map.of("action", action, "rows", rows);
  }

  private static IdempotencyKey key(String scope, String key) {
    if (scope == null || key == null) {
      throw new IllegalArgumentException("scope and key are required");
    }
    return IdempotencyKey.of(scope, key);
  }

  private static long fence(Long fence) {
    if (fence == null) {
      throw new IllegalArgumentException("fence is required (the one read with the stuck key)");
    }
    return fence;
  }
}
