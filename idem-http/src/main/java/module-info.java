/**
 * The HTTP hop: {@link dev.idem.http.IdempotencyKeyFilter}, a servlet filter that makes a route
 * safe to repeat by the client's {@code Idempotency-Key}, and {@link dev.idem.http.client}, which
 * carries a derived key to another company's API and retries only with it, within a budget, and
 * calls a service's own API with one key per intent, stored before the first send ({@code
 * OwnApiCalls}). The jar also serves {@code /idem/idem-client.js} (from {@code META-INF/resources}),
 * the same client for browsers and Node.
 */
module dev.idem.http {
  requires transitive dev.idem.jdbc;
  // The filter's API is servlet types: a user of the module reads them too.
  requires transitive jakarta.servlet;
  requires transitive java.net.http;
  requires com.fasterxml.jackson.databind;
  requires org.slf4j;

  exports dev.idem.http;
  exports dev.idem.http.client;
}
