package dev.idem.kafka;

import dev.idem.internal.base.Require;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Where {@link KafkaInbox} puts a record it gives up on: one whose effect failed {@code maxAttempts}
 * times in a row, or one without a usable id. Returning normally means "kept": the consumer then
 * commits past the record. Throwing means "not kept": the record stays uncommitted and is tried
 * again (its effect too, in a later poll).
 */
@FunctionalInterface
public interface DeadLetters {
  /** Header added to a dead letter: why the record was given up on. */
  String ERROR_HEADER = "idem-dead-letter-error";
  /** Header added to a dead letter: where the record was, as {@code topic-partition@offset}. */
  String ORIGIN_HEADER = "idem-dead-letter-origin";

  /**
   * Keeps {@code record}, given up on because of {@code reason}; throws if it could not.
   *
   * @param reason the effect's last error, or a {@link MissingIdException}
   */
  void keep(ConsumerRecord<byte[], byte[]> record, Exception reason) throws Exception;

  /**
   * Dead letters as records of {@code topic}, sent by {@code producer} and waited for at most
   * {@code timeout} each: the same key, value and headers, plus {@link #ERROR_HEADER} and {@link
   * #ORIGIN_HEADER}. The producer stays yours to configure (make it idempotent, {@code acks=all})
   * and to close.
   */
  static DeadLetters toTopic(Producer<byte[], byte[]> producer, String topic, Duration timeout) {
    Require.notNull(producer, "producer");
    Require.notBlank(topic, "topic");
    Require.positive(timeout, "timeout");
    return (record, reason) -> {
      RecordHeaders headers = new RecordHeaders();
      for (Header h : record.headers()) {
        headers.add(h);
      }
      headers.add(ERROR_HEADER, String.valueOf(reason).getBytes(StandardCharsets.UTF_8));
      headers.add(ORIGIN_HEADER, KafkaInbox.position(record).getBytes(StandardCharsets.UTF_8));
      try {
        producer.send(new ProducerRecord<>(topic, null, record.key(), record.value(), headers))
            .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
      } catch (ExecutionException e) {
        throw KafkaPublisher.failure(e);
      }
    };
  }
}
