package dev.idem.http;

import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * What is stored with a key and replayed to every repeat: the status, the headers worth replaying
 * (see {@link IdempotencyKeyFilter.Builder#replayedHeaders}) in the order they were set, and the
 * body bytes as the handler wrote them.
 */
record StoredResponse(int status, List<Header> headers, byte[] body) {

  StoredResponse {
    headers = List.copyOf(headers);
  }

  /**
   * Writes this response as the whole answer: the status, the stored headers in their order, then
   * {@code extra} (name, value pairs, each replacing a stored header of its name), and the body.
   */
  void writeTo(HttpServletResponse response, String... extra) throws IOException {
    response.setStatus(status);
    Set<String> seen = new HashSet<>();
    for (Header h : headers) {
      if (seen.add(h.name().toLowerCase(Locale.ROOT))) {
        response.setHeader(h.name(), h.value());
      } else {
        response.addHeader(h.name(), h.value());
      }
    }
    for (int i = 0; i < extra.length; i += 2) {
      response.setHeader(extra[i], extra[i + 1]);
    }
    response.setContentLength(body.length);
    if (body.length > 0) {
      response.getOutputStream().write(body);
    }
    response.flushBuffer();
  }

  /** One header line; a header set several times is several lines, in order. */
  record Header(String name, String value) {}
}
