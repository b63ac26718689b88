package dev.idem.http;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;

/**
 * The filter's own answers, as RFC 9457 problem details ({@code application/problem+json}): type,
 * title, status and a detail that says what to do. Never a stack trace or an exception's text
 * beyond the validation message of the key itself. Never stored: the client corrects the request
 * or waits, and resends with the same key.
 *
 * @param slug the problem's name, appended to the configured type base
 */
record Problem(int status, String slug, String title, String detail) {
  private static final ObjectMapper JSON = new ObjectMapper();

  static Problem missingKey(String header) {
    return new Problem(400, "idempotency-key-missing", header + " is missing",
        "This operation requires an " + header + " header: make one key per intent (a random UUID), and send"
            + " the same key with every retry of it.");
  }

  static Problem malformedKey(String detail) {
    return new Problem(400, "idempotency-key-malformed", "Idempotency key is malformed", detail);
  }

  static Problem keyReused(String header) {
    return new Problem(422, "idempotency-key-reused", header + " is already used",
        "This key was first used with a different request (method, route or body). A key names one intent:"
            + " send a new key for a new request.");
  }

  static Problem inFlight(String header) {
    return new Problem(409, "idempotency-key-in-flight", "A request is outstanding for this " + header,
        "A request with the same key is being processed. Retry after the time given in Retry-After; the retry"
            + " gets its response.");
  }

  static Problem missingScopeHeader(String header) {
    return new Problem(400, "idempotency-scope-missing", header + " is missing",
        "Idempotency keys are kept per caller, and this service names the caller by the " + header + " header:"
            + " send it with every request that carries an idempotency key.");
  }

  static Problem repeatedScopeHeader(String header, int times) {
    return new Problem(400, "idempotency-scope-repeated", header + " was sent " + times + " times",
        "Idempotency keys are kept per caller, and this service names the caller by the " + header + " header:"
            + " send it exactly once.");
  }

  static Problem noCaller() {
    // Said to any client: nothing about the server's settings (the filter logs those for its operators).
    return new Problem(403, "idempotency-scope-unknown", "The caller of this request is not known",
        "Idempotency keys are kept per caller, so that no caller gets another's response, and this request"
            + " does not say which caller it comes from. Send it with the credentials this service expects.");
  }

  static Problem tooLarge(long limit) {
    return new Problem(413, "request-too-large", "Request body too large",
        "A request guarded by an idempotency key may have a body of at most " + limit + " bytes.");
  }

  static Problem operationUnknown() {
    // One answer for an operation that never was, is forgotten, or is another caller's: nothing leaks.
    return new Problem(404, "operation-unknown", "No such operation",
        "There is no long operation at this address for this caller, or it is no longer remembered. Use the"
            + " Location of the 202 that accepted the request, with the same credentials.");
  }

  static Problem preferWaitMalformed(String detail) {
    return new Problem(400, "prefer-wait-malformed", "Prefer: wait is malformed", detail);
  }

  /** {@code about:blank} as a type base: every problem's type is {@code about:blank}. */
  static final URI ABOUT_BLANK = URI.create("about:blank");

  /** This problem's type: {@code typeBase} resolved against its name, or {@code about:blank}. */
  String type(URI typeBase) {
    return typeBase.equals(ABOUT_BLANK) ? ABOUT_BLANK.toString() : typeBase.resolve(slug).toString();
  }

  /** The {@code application/problem+json} body. */
  byte[] json(URI typeBase) {
    ObjectNode body = JSON.createObjectNode();
    body.put("type", type(typeBase));
    body.put("title", title);
    body.put("status", status);
    body.put("detail", detail);
    try {
      return JSON.writeValueAsBytes(body);
    } catch (IOException e) {
      throw new IllegalStateException("a tree of strings and an int always writes", e);
    }
  }

  /** Writes this problem as the whole response. */
  void send(HttpServletResponse response, URI typeBase) throws IOException {
    byte[] bytes = json(typeBase);
    response.setStatus(status);
    response.setContentType("application/problem+json");
    response.setHeader("Cache-Control", "no-store");
    response.setContentLength(bytes.length);
    response.getOutputStream().write(bytes);
    response.flushBuffer();
  }
}
