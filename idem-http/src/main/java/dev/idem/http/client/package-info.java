/**
 * The outgoing hop: calls to another company's API that carry a derived idempotency key and are
 * retried only with that same key, with back-off, {@code Retry-After} and a retry budget.
 *
 * <p>{@link dev.idem.http.client.ProviderCalls} makes the calls: {@code send} for the JDK's {@link
 * java.net.http.HttpClient}, {@code call} with a {@link dev.idem.http.client.CallAttempt} for any
 * other client (a Spring {@code RestClient} interceptor, say). {@link
 * dev.idem.http.client.CallPolicy} says when an attempt is repeated, and {@link
 * dev.idem.http.client.CallRetryBudget} caps the retries of all calls that share it at a share of
 * their first attempts. The key to send is {@code ExternalAttempt.callKey()} of {@code
 * IdempotentExecutor.executeExternal}: the same for every attempt and every takeover, so a
 * provider that dedupes by it performs the effect once.
 *
 * <p>{@link dev.idem.http.client.OwnApiCalls} is the client of a service's own API: the key is
 * the intent's, minted once and kept in {@link dev.idem.http.client.IntentKeys} from before the
 * first send until the intent is done, and retried with the same mechanism.
 */
package dev.idem.http.client;
