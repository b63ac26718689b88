package dev.idem.examples.boot;

import dev.idem.jdbc.outbox.OutboxMessage;
import dev.idem.jdbc.outbox.Publisher;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.stereotype.Component;

/**
 * A stand-in for a message broker, in memory: the relay publishes "payment captured" messages to it
 * (it is the application's {@link Publisher}, so the starter runs the relay), and a consumer thread
 * hands each to {@link Receipts}. Like a real broker it delivers at least once: {@link #redeliver}
 * sends a message again, as a broker does after a consumer crash or a rebalance.
 */
@Component
class ReceiptBroker implements Publisher, SmartLifecycle {
  private static final Logger LOG = LoggerFactory.getLogger(ReceiptBroker.class);
  private final BlockingQueue<OutboxMessage> queue = new LinkedBlockingQueue<>();
  private final List<OutboxMessage> log = new CopyOnWriteArrayList<>();
  private final Receipts receipts;
  private volatile Thread consumer;

  ReceiptBroker(Receipts receipts) {
    this.receipts = receipts;
  }

  @Override
  public void publish(OutboxMessage message) {
    log.add(message);
    queue.add(message);
  }

  /** Every message published to this broker, in order (a topic's log). */
  List<OutboxMessage> log() {
    return List.copyOf(log);
  }

  /** Delivers {@code message} once more. */
  void redeliver(OutboxMessage message) {
    queue.add(message);
  }

  @Override
  public synchronized void start() {
    Thread t = new Thread(this::consume, "receipt-consumer");
    t.setDaemon(true);
    consumer = t;
    t.start();
  }

  private void consume() {
    while (consumer == Thread.currentThread()) {
      OutboxMessage m;
      try {
        m = queue.poll(100, TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        return;
      }
      if (m == null) {
        continue;
      }
      try {
        receipts.onPaymentCaptured(m);
      } catch (RuntimeException e) {
        LOG.warn("receipt for message {} failed; redelivering", m.id(), e);
        queue.add(m); // not acknowledged: the broker delivers it again
      }
    }
  }

  @Override
  public synchronized void stop() {
    Thread t = consumer;
    consumer = null;
    if (t != null) {
      t.interrupt();
    }
  }

  @Override
  public boolean isRunning() {
    return consumer != null;
  }
}
