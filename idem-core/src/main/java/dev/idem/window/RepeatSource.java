package dev.idem.window;

import java.time.Duration;

/**
 * Where a late copy of a request or message can come from, and how late it can be: the seed's
 * table of slow paths. A dedupe window must outlive the slowest source a hop can receive from.
 *
 * <p>The figures are presets, not facts about your system: a Kafka topic kept 30 days needs a
 * 30-day window, whatever {@link #KAFKA_REPLAY} says. Declare your own with {@link
 * DedupeWindow#covering(Duration...)} when they differ.
 */
public enum RepeatSource {
  /**
   * A client retrying with backoff: seconds to minutes. Sized at 24 hours, which covers online API
   * retries with room for a client that backs off far.
   */
  CLIENT_RETRY(Duration.ofHours(24)),
  /** A mobile offline queue replayed when the phone is back: hours, sometimes days. Sized at 7 days. */
  MOBILE_OFFLINE_QUEUE(Duration.ofDays(7)),
  /** Webhook retries (Stripe, live mode): up to 3 days, with exponential backoff. */
  WEBHOOK_RETRIES(Duration.ofDays(3)),
  /** A Kafka replay from the earliest offset: the topic's retention, 7 days by default. */
  KAFKA_REPLAY(Duration.ofDays(7)),
  /** An SQS dead-letter redrive: up to the DLQ's retention, at most 14 days. */
  DEAD_LETTER_REDRIVE(Duration.ofDays(14));

  private final Duration slowest;

  RepeatSource(Duration slowest) {
    this.slowest = slowest;
  }

  /** How late a copy from this source can arrive after the first. */
  public Duration slowest() {
    return slowest;
  }
}
