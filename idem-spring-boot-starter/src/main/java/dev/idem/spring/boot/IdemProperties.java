package dev.idem.spring.boot;

import dev.idem.jdbc.outbox.OutboxLayout;
import dev.idem.window.RepeatSource;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.core.Ordered;
import org.springframework.util.unit.DataSize;

/**
 * Settings of idem's auto-configuration, under {@code idem.*}. A setting left unset takes the
 * default of the idem builder it feeds, given in each comment.
 */
@ConfigurationProperties("idem")
public class IdemProperties {
  /**
   * Schema of idem's tables. Unset by default: {@code idem} on PostgreSQL, and on MariaDB (where a
   * schema is a database) the DataSource's own database, the one spring.datasource.url names.
   */
  private String schema;

  private final Migrate migrate = new Migrate();

  /** Executors by name, each a bean of that name (inject with {@code @Qualifier("name")}). */
  private final Map<String, Guard> executors = new LinkedHashMap<>();

  /** Inboxes by consumer name, each a bean of that name. */
  private final Map<String, Guard> inboxes = new LinkedHashMap<>();

  /**
   * Where the outbox writes messages: {@code polled} (idem's relay carries them) or {@code
   * debezium} (Debezium's Outbox Event Router reads them from the write-ahead log; idem's relay
   * does not run). The code that enqueues is the same for both.
   */
  private OutboxLayout outboxLayout = OutboxLayout.POLLED;

  /**
   * How long an executor or inbox answers a repeat of a key it applied or answered lately from
   * memory, taking no connection (never past the key's window; a row changed or deleted by hand is
   * seen again within this time). {@code 0s}: never; at most 10 minutes.
   */
  private Duration answersFromMemory = Duration.ofSeconds(30);

  private final RelayProperties relay = new RelayProperties();

  private final Expiry expiry = new Expiry();

  private final Checks checks = new Checks();

  private final Http http = new Http();

  private final Aop aop = new Aop();

  public String getSchema() {
    return schema;
  }

  public void setSchema(String schema) {
    this.schema = schema;
  }

  public Migrate getMigrate() {
    return migrate;
  }

  public Map<String, Guard> getExecutors() {
    return executors;
  }

  public Map<String, Guard> getInboxes() {
    return inboxes;
  }

  public OutboxLayout getOutboxLayout() {
    return outboxLayout;
  }

  public void setOutboxLayout(OutboxLayout outboxLayout) {
    this.outboxLayout = outboxLayout;
  }

  public Duration getAnswersFromMemory() {
    return answersFromMemory;
  }

  public void setAnswersFromMemory(Duration answersFromMemory) {
    this.answersFromMemory = answersFromMemory;
  }

  public RelayProperties getRelay() {
    return relay;
  }

  public Expiry getExpiry() {
    return expiry;
  }

  public Checks getChecks() {
    return checks;
  }

  public Http getHttp() {
    return http;
  }

  public Aop getAop() {
    return aop;
  }

  /** {@code @Idempotent} on service methods (any bean that is not a controller). */
  public static class Aop {
    /** Whether service methods annotated {@code @Idempotent} run through idem executors. */
    private boolean enabled = true;

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }
  }

  /** idem's own migrations. */
  public static class Migrate {
    /**
     * Whether to create and update idem's tables at start-up (with Flyway, history table {@code
     * idem_schema_history} in idem's schema, apart from the application's own Flyway).
     */
    private boolean enabled = true;

    /**
     * The layout of the key table and the inbox, chosen at the first migration (docs/scale.md):
     * {@code default}, or {@code partitioned} by the time of UUIDv7 keys, whose partitions the
     * scheduled expiry creates ahead and drops.
     */
    private Layout layout = Layout.DEFAULT;

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public Layout getLayout() {
      return layout;
    }

    public void setLayout(Layout layout) {
      this.layout = layout;
    }
  }

  /** The layouts of idem's key table and inbox (IdemFlyway.Layout, named here so binding needs no Flyway). */
  public enum Layout {
    /** One table each; expiry deletes rows in batches. */
    DEFAULT,
    /** Partitioned by the time of UUIDv7 keys; whole days dropped. */
    PARTITIONED
  }

  /** How long a key is remembered, and how a copy of a call still running is answered. */
  public static class Timing {
    /** How long a key is remembered. Default: 24 h for an executor and the HTTP filter, 7 d for an inbox. */
    private Duration window;

    /** How long a copy waits for the first to finish before "in flight". Default 2 s (HTTP: 250 ms). */
    private Duration inFlightWait;

    /** The retry-after told to a copy answered "in flight". Default 1 s. */
    private Duration retryAfter;

    public Duration getWindow() {
      return window;
    }

    public void setWindow(Duration window) {
      this.window = window;
    }

    public Duration getInFlightWait() {
      return inFlightWait;
    }

    public void setInFlightWait(Duration inFlightWait) {
      this.inFlightWait = inFlightWait;
    }

    public Duration getRetryAfter() {
      return retryAfter;
    }

    public void setRetryAfter(Duration retryAfter) {
      this.retryAfter = retryAfter;
    }
  }

  /** One executor or inbox. */
  public static class Guard extends Timing {
    /**
     * Where repeats come from: the window must cover the slowest of these, or start-up fails
     * (e.g. {@code client-retry, webhook-retries}).
     */
    private List<RepeatSource> covers = new ArrayList<>();

    /** An executor's lease for external effects. Default 30 s. */
    private Duration lease;

    public List<RepeatSource> getCovers() {
      return covers;
    }

    public void setCovers(List<RepeatSource> covers) {
      this.covers = covers;
    }

    public Duration getLease() {
      return lease;
    }

    public void setLease(Duration lease) {
      this.lease = lease;
    }
  }

  /** The outbox relay, run when the application defines a {@code Publisher} bean. */
  public static class RelayProperties {
    /** Whether to run the relay (it runs only if a {@code Publisher} bean exists). */
    private boolean enabled = true;

    /** Messages claimed and published per transaction. */
    private int batchSize = 100;

    /** Wait after a batch that sent nothing. */
    private Duration pollInterval = Duration.ofMillis(500);

    /** Failed publishes after which a message is parked. */
    private int maxAttempts = 10;

    /** Back-off after the first failure, doubling per failure. */
    private Duration backoffInitial = Duration.ofSeconds(1);

    /** Longest back-off. */
    private Duration backoffMax = Duration.ofMinutes(5);

    /** Keep order per aggregate key. */
    private boolean ordered = false;

    /** How long sent messages are kept. */
    private Duration retention = Duration.ofDays(7);

    /** LISTEN for enqueues made with {@code outbox.notifying()} (holds one pooled connection). */
    private boolean listen = false;

    /** Longest wait for the batch in progress when the context stops. */
    private Duration shutdownTimeout = Duration.ofSeconds(10);

    /**
     * Run the loop on a virtual thread (Java 21+). Default: {@code spring.threads.virtual.enabled}.
     * A {@code ThreadFactory} bean named {@code idemRelayThreadFactory} takes precedence.
     */
    private Boolean virtualThreads;

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public int getBatchSize() {
      return batchSize;
    }

    public void setBatchSize(int batchSize) {
      this.batchSize = batchSize;
    }

    public Duration getPollInterval() {
      return pollInterval;
    }

    public void setPollInterval(Duration pollInterval) {
      this.pollInterval = pollInterval;
    }

    public int getMaxAttempts() {
      return maxAttempts;
    }

    public void setMaxAttempts(int maxAttempts) {
      this.maxAttempts = maxAttempts;
    }

    public Duration getBackoffInitial() {
      return backoffInitial;
    }

    public void setBackoffInitial(Duration backoffInitial) {
      this.backoffInitial = backoffInitial;
    }

    public Duration getBackoffMax() {
      return backoffMax;
    }

    public void setBackoffMax(Duration backoffMax) {
      this.backoffMax = backoffMax;
    }

    public boolean isOrdered() {
      return ordered;
    }

    public void setOrdered(boolean ordered) {
      this.ordered = ordered;
    }

    public Duration getRetention() {
      return retention;
    }

    public void setRetention(Duration retention) {
      this.retention = retention;
    }

    public boolean isListen() {
      return listen;
    }

    public void setListen(boolean listen) {
      this.listen = listen;
    }

    public Duration getShutdownTimeout() {
      return shutdownTimeout;
    }

    public void setShutdownTimeout(Duration shutdownTimeout) {
      this.shutdownTimeout = shutdownTimeout;
    }

    public Boolean getVirtualThreads() {
      return virtualThreads;
    }

    public void setVirtualThreads(Boolean virtualThreads) {
      this.virtualThreads = virtualThreads;
    }
  }

  /**
   * Deleting keys and inbox ids past their window; in the partitioned layout, creating partitions
   * ahead and dropping old ones ({@code Operations.maintainPartitions()}).
   */
  public static class Expiry {
    /** Whether to run the expiry of every configured executor and inbox on a schedule. */
    private boolean enabled = true;

    /** Time between runs (the first a full interval after start-up). */
    private Duration interval = Duration.ofHours(1);

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public Duration getInterval() {
      return interval;
    }

    public void setInterval(Duration interval) {
      this.interval = interval;
    }
  }

  /**
   * The scheduled checks: reconciliation of the effect tables named here against idem's keys, run
   * every {@code interval} by one instance of the fleet at a time (a lease), its findings as meters
   * and in {@code /actuator/idem}. Off unless enabled: the checks scan whole tables.
   */
  public static class Checks {
    /** Whether to run the checks on a schedule. */
    private boolean enabled = false;

    /**
     * Time between runs across the fleet (the first at start-up, if no instance ran within the
     * last interval); from 1 s to 1 d.
     */
    private Duration interval = Duration.ofHours(1);

    /**
     * The lease that lets one instance run at a time: services that share idem's tables but not
     * their effect tables each name their own.
     */
    private String leaseResource = "idem-checks";

    /**
     * Whether to check for two message ids for one intent at every inbox and the outbox. Off by
     * default: it assumes each intent sends at most one message per topic and each consumer
     * receives at most one per intent; an effect that sends several gives each its own intent
     * ({@code NewMessage.withIntent(Keys.child(key, step))}) before turning this on.
     */
    private boolean lineage = false;

    /**
     * Effect tables reconciled with idem's keys, by name (the meters' {@code check} tag is {@code
     * reconcile:<name>}).
     */
    private Map<String, EffectTableProperties> effectTables = new LinkedHashMap<>();

    public boolean isEnabled() {
      return enabled;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public Duration getInterval() {
      return interval;
    }

    public void setInterval(Duration interval) {
      this.interval = interval;
    }

    public String getLeaseResource() {
      return leaseResource;
    }

    public void setLeaseResource(String leaseResource) {
      this.leaseResource = leaseResource;
    }

    public boolean isLineage() {
      return lineage;
    }

    public void setLineage(boolean lineage) {
      this.lineage = lineage;
    }

    public Map<String, EffectTableProperties> getEffectTables() {
      return effectTables;
    }

    public void setEffectTables(Map<String, EffectTableProperties> effectTables) {
      this.effectTables = effectTables;
    }
  }

  /** One effect table of the scheduled reconciliation (see {@code EffectTable}). */
  public static class EffectTableProperties {
    /** The table. Default: the entry's name. */
    private String table;

    /** The column holding each effect's intent key (the value of its idempotency key). Required. */
    private String keyColumn;

    /** The table's schema (on MariaDB, its database). Default: the connection's. */
    private String schema;

    /** The scope of idem's keys whose completed keys must each have an effect. Default: none (not checked). */
    private String scope;

    /**
     * The name of a {@code ProviderRecords} bean: what the provider did is compared with this
     * table and idem's external keys (double provider effects, provider effects without a key,
     * keys the provider never saw). Default: none (the provider's side is not checked).
     */
    private String provider;

    /** How far back from each run the provider's effects are compared (at most 366 days). Default: 1 day. */
    private Duration providerRange = Duration.ofDays(1);

    /**
     * The column holding the reference the provider's effects carry, for effects whose call key is
     * not one of idem's. Default: the key column.
     */
    private String referenceColumn;

    public String getTable() {
      return table;
    }

    public void setTable(String table) {
      this.table = table;
    }

    public String getKeyColumn() {
      return keyColumn;
    }

    public void setKeyColumn(String keyColumn) {
      this.keyColumn = keyColumn;
    }

    public String getSchema() {
      return schema;
    }

    public void setSchema(String schema) {
      this.schema = schema;
    }

    public String getScope() {
      return scope;
    }

    public void setScope(String scope) {
      this.scope = scope;
    }

    public String getProvider() {
      return provider;
    }

    public void setProvider(String provider) {
      this.provider = provider;
    }

    public Duration getProviderRange() {
      return providerRange;
    }

    public void setProviderRange(Duration providerRange) {
      this.providerRange = providerRange;
    }

    public String getReferenceColumn() {
      return referenceColumn;
    }

    public void setReferenceColumn(String referenceColumn) {
      this.referenceColumn = referenceColumn;
    }
  }

  /**
   * The Idempotency-Key filter of a servlet web application. Nothing is guarded until a handler
   * method is annotated {@code @Idempotent} or {@code url-patterns} is set. Whose key it is comes
   * from {@code scope-header}, a {@code ScopeResolver} bean, or the authenticated principal (Spring
   * Security). Anything else (the store policy of url-pattern routes, a guard by code) is set with
   * an {@link IdempotencyKeyFilterCustomizer} bean.
   */
  public static class Http extends Timing {
    /**
     * Whether to guard anything over HTTP. With false, {@code @Idempotent} handlers run unguarded
     * and start-up logs a WARN naming them.
     */
    private boolean enabled = true;

    /**
     * The guard's place among the servlet filters. Default {@code Ordered.LOWEST_PRECEDENCE - 10}
     * (2147483637): after Spring Security's filter chain (-100) and every filter with a lower
     * order. A filter with no order (LOWEST_PRECEDENCE) runs after the guard: if it authenticates
     * the caller, give it a lower order or raise this one.
     */
    private int filterOrder = Ordered.LOWEST_PRECEDENCE - 10;

    /**
     * URL patterns guarded besides the {@code @Idempotent} handlers, servlet style ({@code
     * /payments/*}); of those requests, the {@code methods} are guarded. Default none. Actuator
     * endpoints and the error path are never guarded, except actuator endpoints when {@code
     * management.endpoints.web.base-path=/} puts them among the application's paths.
     */
    private List<String> urlPatterns = new ArrayList<>();

    /** HTTP methods guarded under {@code url-patterns} (others pass through). */
    private List<String> methods = new ArrayList<>(List.of("POST", "PATCH"));

    /**
     * A request header naming the caller (e.g. {@code X-Tenant-Id}, set by a gateway the caller
     * cannot bypass): keys are kept per value, and a guarded request without it is refused with
     * 400. Default none: a {@code ScopeResolver} bean, else the authenticated principal.
     */
    private String scopeHeader;

    /**
     * Dangerous: one key space for every caller, so a caller who sends a key another used gets
     * that caller's stored response. Only for a service with one caller.
     */
    private boolean sharedScope = false;

    /**
     * Base of the {@code type} URIs of the filter's problem answers (e.g. {@code
     * https://api.example.com/problems/}, resolved against {@code idempotency-key-missing}...).
     * Default none: the filter's, {@code https://idem.dev/problems/}; {@code about:blank} makes
     * every type {@code about:blank}.
     */
    private URI problemTypeBase;

    /** The request header that carries the key. */
    private String headerName = "Idempotency-Key";

    /** Accept a bare token besides the draft's quoted Structured Field string. */
    private boolean acceptBareKeys = true;

    /**
     * Under {@code url-patterns}: refuse a guarded request without the header with 400 (false: run
     * it unguarded). An {@code @Idempotent} handler says its own ({@code keyRequired}).
     */
    private boolean keyRequired = true;

    /** Largest request body of a guarded request (larger: 413). Default 1 MB. */
    private DataSize maxBodySize;

    /** What a returning key is compared on besides method and path: the canonical JSON body, or the raw bytes. */
    private Fingerprint fingerprint = Fingerprint.CANONICAL_JSON;

    /** Only these JSON fields (JSON pointers, e.g. /amount) of the body, instead of all of it. */
    private List<String> fingerprintFields = new ArrayList<>();

    /** Request headers that are part of the fingerprint too. */
    private List<String> fingerprintHeaders = new ArrayList<>();

    /** Response headers stored and replayed besides Content-Type, Content-Encoding and Location. */
    private List<String> replayedHeaders = new ArrayList<>();

    /** Long operations: 202 Accepted with a status resource per key (off until status-path is set). */
    private LongOperations longOperations = new LongOperations();

    /**
     * Long operations ({@code dev.idem.http.LongOperations}): a guarded handler may answer 202 with
     * the {@code Location} of a status resource under {@code status-path}, which the guard answers.
     */
    public static class LongOperations {
      /**
       * Where status resources live, within the application's context path (e.g. {@code
       * /operations/}: starts and ends with a slash). Default none: long operations are off, and a
       * {@code LongOperations} bean is made only when this is set.
       */
      private String statusPath;

      /** The longest a GET of a status resource waits when the client sends {@code Prefer: wait=N}; 0 to 5 min. */
      private Duration maxWait = Duration.ofSeconds(10);

      /**
       * How long a final response is kept after it is recorded. Default: {@code idem.http.window},
       * else 24 h; it must be at least the window of every guarded route.
       */
      private Duration window;

      public String getStatusPath() {
        return statusPath;
      }

      public void setStatusPath(String statusPath) {
        this.statusPath = statusPath;
      }

      public Duration getMaxWait() {
        return maxWait;
      }

      public void setMaxWait(Duration maxWait) {
        this.maxWait = maxWait;
      }

      public Duration getWindow() {
        return window;
      }

      public void setWindow(Duration window) {
        this.window = window;
      }
    }

    public LongOperations getLongOperations() {
      return longOperations;
    }

    public void setLongOperations(LongOperations longOperations) {
      this.longOperations = longOperations;
    }

    /** How a request is compared with the first of its key. */
    public enum Fingerprint {
      /** The JSON body, field order and white space ignored (any other body as its bytes). */
      CANONICAL_JSON,
      /** The body's bytes. */
      RAW_BODY
    }

    public boolean isEnabled() {
      return enabled;
    }

    public int getFilterOrder() {
      return filterOrder;
    }

    public void setFilterOrder(int filterOrder) {
      this.filterOrder = filterOrder;
    }

    public void setEnabled(boolean enabled) {
      this.enabled = enabled;
    }

    public String getScopeHeader() {
      return scopeHeader;
    }

    public void setScopeHeader(String scopeHeader) {
      this.scopeHeader = scopeHeader;
    }

    public boolean isSharedScope() {
      return sharedScope;
    }

    public void setSharedScope(boolean sharedScope) {
      this.sharedScope = sharedScope;
    }

    public URI getProblemTypeBase() {
      return problemTypeBase;
    }

    public void setProblemTypeBase(URI problemTypeBase) {
      this.problemTypeBase = problemTypeBase;
    }

    public List<String> getUrlPatterns() {
      return urlPatterns;
    }

    public void setUrlPatterns(List<String> urlPatterns) {
      this.urlPatterns = urlPatterns;
    }

    public List<String> getMethods() {
      return methods;
    }

    public void setMethods(List<String> methods) {
      this.methods = methods;
    }

    public String getHeaderName() {
      return headerName;
    }

    public void setHeaderName(String headerName) {
      this.headerName = headerName;
    }

    public boolean isAcceptBareKeys() {
      return acceptBareKeys;
    }

    public void setAcceptBareKeys(boolean acceptBareKeys) {
      this.acceptBareKeys = acceptBareKeys;
    }

    public boolean isKeyRequired() {
      return keyRequired;
    }

    public void setKeyRequired(boolean keyRequired) {
      this.keyRequired = keyRequired;
    }

    public DataSize getMaxBodySize() {
      return maxBodySize;
    }

    public void setMaxBodySize(DataSize maxBodySize) {
      this.maxBodySize = maxBodySize;
    }

    public Fingerprint getFingerprint() {
      return fingerprint;
    }

    public void setFingerprint(Fingerprint fingerprint) {
      this.fingerprint = fingerprint;
    }

    public List<String> getFingerprintFields() {
      return fingerprintFields;
    }

    public void setFingerprintFields(List<String> fingerprintFields) {
      this.fingerprintFields = fingerprintFields;
    }

    public List<String> getFingerprintHeaders() {
      return fingerprintHeaders;
    }

    public void setFingerprintHeaders(List<String> fingerprintHeaders) {
      this.fingerprintHeaders = fingerprintHeaders;
    }

    public List<String> getReplayedHeaders() {
      return replayedHeaders;
    }

    public void setReplayedHeaders(List<String> replayedHeaders) {
      this.replayedHeaders = replayedHeaders;
    }
  }
}
