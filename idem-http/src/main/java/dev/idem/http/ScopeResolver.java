package dev.idem.http;

import jakarta.servlet.http.HttpServletRequest;
import java.security.Principal;

/**
 * Whose key it is: the caller a guarded request comes from (an API account, a tenant, a user), so
 * that one key value sent by two callers is two keys and neither ever gets the other's response.
 * Implement it when callers are neither servlet principals nor named by one request header.
 *
 * <pre>{@code
 * ScopeResolver byAccount = request -> accounts.idOf(request.getHeader("Authorization"));
 * IdempotencyKeyFilter.builder(idem).scope(byAccount).build();
 * }</pre>
 *
 * <p>Return {@code null}, or a blank string, when the request names no caller: the filter refuses
 * it with a problem (403) before anything is claimed or run, rather than put it in a key space
 * shared with others. A scope that is not a valid key part (over 255 characters, spaces,
 * non-ASCII), or that starts with {@code sha256:}, is replaced by {@code sha256:} and its SHA-256,
 * so it stays one scope per caller and never equals another caller's. Called once per guarded
 * request that carries a key, on the request's thread; it must be thread-safe.
 */
@FunctionalInterface
public interface ScopeResolver {

  /**
   * The authenticated principal's name ({@code getUserPrincipal()}), or {@code null} (refused)
   * when the request is not authenticated. The filter's default.
   */
  ScopeResolver PRINCIPAL = request -> {
    Principal p = request.getUserPrincipal();
    return p == null || p.getName() == null || p.getName().isEmpty() ? null : p.getName();
  };

  /**
   * The scope of {@code request}'s key, or {@code null} (or blank) if it names no caller: it is
   * refused.
   */
  String scopeOf(HttpServletRequest request);
}
