package dev.idem.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Makes a method safe to repeat: it runs once per key, and every repeat of the key gets the first
 * outcome back. Nothing is guarded because the starter is on the class path; this annotation (or
 * the explicit {@code idem.http.url-patterns}) is how a method opts in.
 *
 * <ul>
 *   <li><b>On a Spring MVC handler method</b> ({@code @PostMapping} in a {@code @RestController}):
 *       the route is guarded by the client's {@code Idempotency-Key} header (see docs/http.md). The
 *       handler's writes, the key and the stored response commit together; a repeat gets the
 *       stored response; another body under the key gets 422; a copy still running gets 409.
 *       A copy arriving while the first runs in this process waits in memory, holding no pool
 *       connection. {@link #key()} and {@link #scope()} do not apply: the key is the header, its
 *       scope the caller ({@code idem.http.scope-header}, a {@code ScopeResolver} bean, or the
 *       principal); an application with an annotated handler and no way to tell callers apart
 *       does not start.
 *   <li><b>On any other Spring bean's method</b> (a {@code @Service}): the call runs through an
 *       idem executor. The key comes from {@link #key()} (a SpEL expression over the arguments) or
 *       from the parameter marked {@link IdempotencyKey}; the arguments are the request's
 *       fingerprint; the return value is stored (JSON) and returned to every repeat without
 *       running the method. The key joins the Spring transaction open on the thread; with none
 *       open, the call begins one through the application's transaction manager (with the
 *       method's own {@code @Transactional} attributes, if any), so JdbcTemplate and JPA write in
 *       it with the key.
 * </ul>
 *
 * <p>Not guaranteed: effects outside the database transaction (an email, a call to another
 * company: use the outbox or an external effect); recognising a repeat after the {@link #window()}.
 */
@Documented
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.METHOD)
public @interface Idempotent {

  /**
   * How long a key is remembered, by the database clock, as a Spring Boot duration ({@code "24h"},
   * {@code "7d"}; property placeholders are resolved). Empty (the default): on an HTTP handler,
   * {@code idem.http.window} if set, else 24 hours, the client retry window; on a service method,
   * 24 hours.
   */
  String window() default "";

  /**
   * HTTP handlers only: whether a request without the key header is refused with 400 (true, the
   * default) or runs unguarded (false). Wins over {@code idem.http.key-required}, which is for
   * {@code url-patterns} routes.
   */
  boolean keyRequired() default true;

  /**
   * HTTP handlers only: 4xx statuses stored and replayed besides {@code StorePolicy.DEFAULT}'s
   * (2xx, 3xx and the business 4xx such as 402). A status not stored rolls the handler's writes
   * and the key back, so a retry runs again; 5xx are never stored. Set, the route's policy is
   * {@code StorePolicy.DEFAULT} plus these, replacing one an {@code
   * IdempotencyKeyFilterCustomizer} set. Empty (the default): the customizers' policy, else the
   * default policy.
   */
  int[] storedStatuses() default {};

  /**
   * Service methods only: a SpEL expression over the arguments ({@code "#order.id"}, {@code
   * "#p0"}; their properties and methods only, no types, constructors or beans) whose value's
   * {@code toString()} is the key: a {@code CharSequence}, number, {@code UUID}, enum, or a class
   * that declares its own {@code toString()}, such as a record. Empty: the parameter marked {@link
   * IdempotencyKey}; exactly one of the two. Parsed at start-up (a syntax error stops it); a value
   * that is null, of another class, or not a valid key throws an {@code IllegalArgumentException}
   * at the call, naming the method, before it runs.
   */
  String key() default "";

  /**
   * Service methods only: the key's scope, so the same key value in two scopes is two keys.
   * Empty (the default): the bean's class and the method's name ({@code com.example.Checkout.pay}),
   * so two methods never share keys; set it to keep keys across a rename.
   */
  String scope() default "";
}
