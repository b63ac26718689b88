package dev.idem.http;

import java.util.List;

/**
 * What is stored with a key and replayed to every repeat: the status, the headers worth replaying
 * (see {@link IdempotencyKeyFilter.Builder#replayedHeaders}) in the order they were set, and the
 * body bytes as the handler wrote them.
 */
record StoredResponse(int status, List<Header> headers, byte[] body) {

  StoredResponse {
    headers = List.copyOf(headers);
  }

  /** One header line; a header set several times is several lines, in order. */
  record Header(String name, String value) {}
}
