package dev.idem.spring.boot;

import dev.idem.http.IdempotencyKeyFilter;
import dev.idem.spring.Idempotent;
import dev.idem.window.DedupeWindow;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import java.util.stream.IntStream;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.core.env.Environment;
import org.springframework.util.ClassUtils;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.bind.annotation.RequestMethod;
import org.springframework.web.servlet.HandlerExecutionChain;
import org.springframework.web.servlet.mvc.method.RequestMappingInfo;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerMapping;
import org.springframework.web.util.ServletRequestPathUtils;

/**
 * Decides which requests reach an {@link IdempotencyKeyFilter}, and which one: the one servlet
 * filter the starter maps (to every path, REQUEST dispatches only).
 *
 * <ul>
 *   <li>A request whose Spring MVC handler method is annotated {@link Idempotent} goes to the
 *       filter built for that annotation's settings (window, key required, stored statuses).
 *       Handlers are found once, at start-up, in the {@code requestMappingHandlerMapping}; each
 *       distinct set of settings gets one filter (and so one executor and one in-memory table of
 *       running keys), shared by every handler with those settings. At request time, a request
 *       whose HTTP method one of those handlers is mapped to has its handler looked up the way the
 *       DispatcherServlet will look it up (other requests skip the lookup); a request with no
 *       handler method (404, 405, CORS pre-flight, static resources, router functions) passes.
 *   <li>Else a request under {@code idem.http.url-patterns} whose method is in {@code
 *       idem.http.methods} goes to the {@code IdempotencyKeyFilter} bean.
 *   <li>A {@code GET} under the status path of long operations ({@code
 *       idem.http.long-operations.status-path}, when set) goes to the {@code IdempotencyKeyFilter}
 *       bean, which answers it (the status of a long operation, for its caller only).
 *   <li>Everything else passes untouched: unannotated handlers, the actuator's endpoints (under
 *       {@code management.endpoints.web.base-path}) and the error path ({@code server.error.path}),
 *       even under {@code url-patterns=/*}, and every dispatch other than REQUEST.
 * </ul>
 *
 * <p>At start-up, when anything is guarded and keys could only be scoped by a principal nothing
 * provides (no {@code idem.http.scope-header}, no {@code ScopeResolver} bean, no shared scope, no
 * Spring Security on the class path), start-up fails with a message naming the three ways: a key
 * must never cross callers. A principal set by something else than Spring Security (a container
 * realm, a filter of your own) is taken with a {@code ScopeResolver.PRINCIPAL} bean.
 *
 * <p>Not guarded by path: with {@code management.endpoints.web.base-path=/} the actuator's
 * endpoints share the root with the application; then keep them out of {@code url-patterns}.
 */
final class IdemHttpGuards implements Filter, SmartInitializingSingleton {
  /** The settings an {@link Idempotent} handler gives its route; equal settings share one filter. */
  record Route(Duration window, boolean keyRequired, List<Integer> storedStatuses) {}

  private static final String SPRING_SECURITY = "org.springframework.security.core.context.SecurityContextHolder";

  private final Function<Route, IdempotencyKeyFilter> filters;
  private final IdempotencyKeyFilter urlFilter;
  private final List<String> urlPatterns;
  /** {@link #urlPatterns}, parsed once so a request is matched without allocating. */
  private final List<UrlPattern> parsedPatterns;
  private final List<String> methods;
  /** The paths never guarded, each with its trailing "/": the path itself and everything under it. */
  private final List<String> neverGuarded;
  private final boolean callerKnown;
  private final ObjectProvider<RequestMappingHandlerMapping> mappings;
  private final Environment environment;
  // Set once at start-up, before the server takes requests; volatile so no request thread reads a stale one.
  private volatile RequestMappingHandlerMapping mapping;
  private volatile Map<Method, IdempotencyKeyFilter> byHandler = Map.of();
  /** The HTTP methods the annotated handlers are mapped to, or null for any: other requests skip the lookup. */
  private volatile Set<String> handlerMethods = Set.of();
  /** The path of long operations' status resources (GETs answered by the url filter), or null when off. */
  private final String statusPath;

  /**
   * @param filters builds the filter of a route's settings
   * @param urlFilter the filter of {@code url-patterns}
   * @param callerKnown whether keys are scoped by something else than a principal (a header, a
   *     resolver, the shared scope)
   * @param statusPath the status path of the long operations, or null when there are none
   */
  IdemHttpGuards(Function<Route, IdempotencyKeyFilter> filters, IdempotencyKeyFilter urlFilter, IdemProperties.Http http,
      boolean callerKnown, ObjectProvider<RequestMappingHandlerMapping> mappings, Environment environment, String statusPath) {
    this.filters = filters;
    this.statusPath = statusPath;
    this.urlFilter = urlFilter;
    this.urlPatterns = List.copyOf(http.getUrlPatterns());
    for (String p : urlPatterns) {
      if (p == null || !(p.startsWith("/") || (p.startsWith("*.") && p.length() > 2))) {
        throw new IllegalArgumentException("idem.http.url-patterns: \"" + p + "\" is not a servlet URL pattern"
            + " (/exact, /prefix/*, *.extension)");
      }
    }
    this.parsedPatterns = urlPatterns.stream().map(UrlPattern::of).toList();
    this.methods = http.getMethods().stream().map(m -> m.toUpperCase(Locale.ROOT)).toList();
    this.callerKnown = callerKnown;
    this.mappings = mappings;
    this.environment = environment;
    String mvc = trimSlash(environment.getProperty("spring.mvc.servlet.path", ""));
    String management = trimSlash(environment.getProperty("management.endpoints.web.base-path", "/actuator"));
    String error = trimSlash(environment.getProperty("server.error.path", "/error"));
    this.neverGuarded = management.isEmpty() ? List.of(mvc + error + "/") : List.of(mvc + management + "/", mvc + error + "/");
  }

  private static String trimSlash(String path) {
    String p = path.endsWith("/") ? path.substring(0, path.length() - 1) : path;
    return p.isEmpty() || p.startsWith("/") ? p : "/" + p;
  }

  /**
   * Finds the {@link Idempotent} handlers, builds one filter per distinct settings, and refuses to
   * start without a caller scope.
   */
  @Override
  public void afterSingletonsInstantiated() {
    mapping = mappings.getIfAvailable();
    Map<Route, IdempotencyKeyFilter> bySettings = new HashMap<>();
    Map<Method, IdempotencyKeyFilter> found = new HashMap<>();
    Set<String> httpMethods = new HashSet<>();
    boolean anyMethod = false;
    if (mapping != null) {
      for (Map.Entry<RequestMappingInfo, HandlerMethod> e : mapping.getHandlerMethods().entrySet()) {
        HandlerMethod handler = e.getValue();
        Idempotent idempotent = handler.getMethodAnnotation(Idempotent.class);
        if (idempotent == null) {
          continue;
        }
        String where = "@Idempotent on " + handler.getBeanType().getName() + "." + handler.getMethod().getName();
        found.put(handler.getMethod(), bySettings.computeIfAbsent(route(where, idempotent), r -> build(r, where)));
        Set<RequestMethod> mapped = e.getKey().getMethodsCondition().getMethods();
        anyMethod |= mapped.isEmpty();
        mapped.forEach(m -> httpMethods.add(m.name()));
      }
    }
    if (httpMethods.contains("GET")) {
      httpMethods.add("HEAD"); // Spring MVC sends a HEAD to the GET handler
    }
    if ((!found.isEmpty() || !urlPatterns.isEmpty()) && !callerKnown
        && !ClassUtils.isPresent(SPRING_SECURITY, getClass().getClassLoader())) {
      throw noCallerScope(found.keySet());
    }
    handlerMethods = anyMethod ? null : Set.copyOf(httpMethods);
    byHandler = Map.copyOf(found);
  }

  private IdemSetupException noCallerScope(Iterable<Method> handlers) {
    StringBuilder what = new StringBuilder();
    for (Method m : handlers) {
      what.append(what.length() == 0 ? "" : ", ").append("@Idempotent ").append(m.getDeclaringClass().getSimpleName())
          .append('.').append(m.getName());
    }
    if (!urlPatterns.isEmpty()) {
      what.append(what.length() == 0 ? "" : ", ").append("idem.http.url-patterns=").append(urlPatterns);
    }
    return new IdemSetupException("idem guards HTTP requests here (" + what + ") but cannot tell callers apart, and an"
        + " idempotency key must never cross callers (a caller would get another's stored response)",
        "Scope keys in one of three ways:"
        + " (1) idem.http.scope-header=<a request header naming the caller, e.g. X-Tenant-Id, set by your gateway>;"
        + " (2) a bean implementing dev.idem.http.ScopeResolver (ScopeResolver.PRINCIPAL takes a principal your own"
        + " filter or the container sets); (3) Spring Security on the class path: the authenticated principal."
        + " idem.http.shared-scope=true puts every caller in one key space instead: dangerous, see docs/http.md.");
  }

  /** The settings of an annotation; {@code where} names it in an error. */
  private Route route(String where, Idempotent idempotent) {
    DedupeWindow window = IdempotentMethod.window(where + ": window", idempotent.window(), environment);
    return new Route(window == null ? null : window.length(), idempotent.keyRequired(), IntStream.of(idempotent.storedStatuses()).sorted().distinct().boxed().toList());
  }

  /** The filter of {@code route}, built at start-up so a setting the builder refuses names the handler. */
  private IdempotencyKeyFilter build(Route route, String where) {
    try {
      return filters.apply(route);
    } catch (IllegalArgumentException e) {
      throw new IdemSetupException(where + ": " + e.getMessage(), "Fix that attribute of the annotation.", e);
    }
  }

  @Override
  public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain) throws IOException, ServletException {
    // REQUEST dispatches only: the registration maps it so (and the filter checks again).
    IdempotencyKeyFilter filter = req instanceof HttpServletRequest request ? filterOf(request) : null;
    if (filter == null) {
      chain.doFilter(req, res);
    } else {
      filter.doFilter(req, res, chain);
    }
  }

  private IdempotencyKeyFilter filterOf(HttpServletRequest request) {
    // The cheap tests first: most requests (GETs, when only writes are guarded) stop here.
    String method = request.getMethod();
    if (statusPath != null && "GET".equals(method)
        && (request.getServletPath() + (request.getPathInfo() == null ? "" : request.getPathInfo())).startsWith(statusPath)) {
      return urlFilter; // a long operation's status resource: the filter answers it
    }
    Map<Method, IdempotencyKeyFilter> handlers = byHandler;
    Set<String> annotatedMethods = handlerMethods;
    boolean byRoute = !handlers.isEmpty() && (annotatedMethods == null || annotatedMethods.contains(method));
    boolean byUrl = !parsedPatterns.isEmpty() && methods.contains(method);
    if (!byRoute && !byUrl) {
      return null;
    }
    String path = request.getServletPath() + (request.getPathInfo() == null ? "" : request.getPathInfo());
    for (String dir : neverGuarded) {
      if (isOrUnder(path, dir)) {
        return null;
      }
    }
    if (byRoute) {
      Method handler = handlerOf(request);
      IdempotencyKeyFilter filter = handler == null ? null : handlers.get(handler);
      if (filter != null) {
        return filter;
      }
    }
    if (byUrl) {
      for (UrlPattern pattern : parsedPatterns) {
        if (pattern.matches(path)) {
          return urlFilter;
        }
      }
    }
    return null;
  }

  /** Whether {@code path} is {@code dir} (which ends with "/") without its "/", or under it. */
  private static boolean isOrUnder(String path, String dir) {
    return path.startsWith(dir) || (path.length() == dir.length() - 1 && dir.startsWith(path));
  }

  /**
   * The handler method Spring MVC will run for {@code request}, or null (no handler: a 404, a 405, a
   * CORS pre-flight, a static resource, a router function). The path is parsed here as the
   * DispatcherServlet parses it; every request attribute the lookup sets or changes (the parsed
   * path, the best matching pattern and handler, the URI template variables...) is put back as it
   * was, so filters after this one see the request as if no lookup had happened.
   */
  private Method handlerOf(HttpServletRequest request) {
    Map<String, Object> before = new HashMap<>();
    for (String name : Collections.list(request.getAttributeNames())) {
      before.put(name, request.getAttribute(name));
    }
    try {
      ServletRequestPathUtils.parseAndCache(request);
      HandlerExecutionChain found = mapping.getHandler(request);
      return found != null && found.getHandler() instanceof HandlerMethod handler ? handler.getMethod() : null;
    } catch (Exception noHandler) {
      return null; // the DispatcherServlet answers it (405, 406...) unguarded
    } finally {
      for (String name : Collections.list(request.getAttributeNames())) {
        if (!before.containsKey(name)) {
          request.removeAttribute(name);
        }
      }
      before.forEach((name, value) -> {
        if (request.getAttribute(name) != value) {
          request.setAttribute(name, value);
        }
      });
    }
  }

  /**
   * A servlet URL pattern (Servlet 6.0, 12.2), matched on the path within the application.
   *
   * @param text for {@code PREFIX} the prefix with its trailing "/", for {@code SUFFIX} the
   *     extension with its dot, for {@code EXACT} the path; unused for {@code ALL}
   */
  private record UrlPattern(Kind kind, String text) {
    enum Kind { ALL, PREFIX, SUFFIX, EXACT }

    static UrlPattern of(String pattern) {
      if (pattern.equals("/*") || pattern.equals("/")) {
        return new UrlPattern(Kind.ALL, pattern);
      }
      if (pattern.endsWith("/*")) {
        return new UrlPattern(Kind.PREFIX, pattern.substring(0, pattern.length() - 1));
      }
      if (pattern.startsWith("*.")) {
        return new UrlPattern(Kind.SUFFIX, pattern.substring(1));
      }
      return new UrlPattern(Kind.EXACT, pattern);
    }

    boolean matches(String path) {
      return switch (kind) {
        case ALL -> true;
        case PREFIX -> isOrUnder(path, text);
        // The last segment ends with the extension: the extension starts after the last "/".
        case SUFFIX -> path.endsWith(text) && path.length() - text.length() > path.lastIndexOf('/');
        case EXACT -> path.equals(text);
      };
    }
  }

  @Override
  public String toString() {
    return "IdemHttpGuards[" + byHandler.size() + " @Idempotent handlers, url-patterns " + urlPatterns + "]";
  }
}
