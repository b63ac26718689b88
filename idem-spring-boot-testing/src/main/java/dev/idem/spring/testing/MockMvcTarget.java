package dev.idem.spring.testing;

import dev.idem.testing.Copy;
import dev.idem.testing.Target;
import java.util.function.Function;
import org.springframework.mock.web.MockHttpServletResponse;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.RequestBuilder;

/**
 * Your Spring MVC endpoint through {@link MockMvc}, as a {@link Target} of {@link
 * dev.idem.testing.Repeats}: no port, the same filters (idem's guard among them) and handlers. In
 * a class of its own, so the rest of this module loads without the servlet API.
 */
public final class MockMvcTarget {
  private MockMvcTarget() {}

  /**
   * Each copy's request built by {@code request}, e.g. {@code copy -> post("/payments").header(
   * "Idempotency-Key", copy.key()).contentType(APPLICATION_JSON).content(...)}, performed on
   * {@code mvc}. As a client that retries safely ({@link Target.Attempt#ofHttp}): a 5xx, 409 or 425,
   * or an exception the application let out (a real server would answer 500), is sent again with
   * the same key, after the response's {@code Retry-After}; any other status is final.
   *
   * @throws IllegalArgumentException if either argument is null
   */
  public static Target of(MockMvc mvc, Function<Copy, ? extends RequestBuilder> request) {
    if (mvc == null) {
      throw new IllegalArgumentException("mvc is null");
    }
    if (request == null) {
      throw new IllegalArgumentException("request is null");
    }
    return copy -> {
      RequestBuilder r = request.apply(copy);
      if (r == null) {
        throw new IllegalArgumentException("the request function returned null for " + copy);
      }
      MockHttpServletResponse response;
      try {
        response = mvc.perform(r).andReturn().getResponse();
      } catch (Exception e) {
        return Target.Attempt.again("500 (" + e.getClass().getSimpleName() + " out of the application)");
      }
      int status = response.getStatus();
      String outcome = status + ("true".equalsIgnoreCase(response.getHeader("Idempotent-Replayed")) ? " replayed" : "");
      return Target.Attempt.ofHttp(status, response.getHeader("Retry-After"), outcome);
    };
  }
}
