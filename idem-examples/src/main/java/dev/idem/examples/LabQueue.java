package dev.idem.examples;

import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Map;

/**
 * The queue between the outbox relay and the worker: in-process, at least once. A message stays
 * on the queue until the worker acknowledges it; a worker that fails (or crashes) before its ack
 * gets it again, and a lost ack ({@link Hop#QUEUE}'s fault) redelivers a message already handled.
 * Each delivery carries the message id the outbox minted, which is what an inbox dedupes by.
 */
final class LabQueue {
  /** One delivery of a message. */
  record Delivery(String messageId, String topic, byte[] payload, Map<String, String> headers, int delivery) {}

  private final Deque<Delivery> ready = new ArrayDeque<>();
  private int published;

  synchronized void publish(String messageId, String topic, byte[] payload, Map<String, String> headers) {
    published++;
    ready.addLast(new Delivery(messageId, topic, payload.clone(), Map.copyOf(headers), 1));
  }

  /** The next delivery, or null when the queue is empty. */
  synchronized Delivery poll() {
    return ready.pollFirst();
  }

  /** Puts an unacknowledged (or "lost ack") delivery back, as a visibility timeout would. */
  synchronized void redeliver(Delivery d) {
    ready.addLast(new Delivery(d.messageId(), d.topic(), d.payload(), d.headers(), d.delivery() + 1));
  }

  synchronized boolean isEmpty() {
    return ready.isEmpty();
  }

  synchronized int published() {
    return published;
  }
}
