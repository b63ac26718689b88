package dev.idem.kafka;

import dev.idem.internal.Failures;
import dev.idem.internal.base.Require;
import dev.idem.internal.Stopping;
import dev.idem.jdbc.inbox.BatchEffect;
import dev.idem.jdbc.inbox.Inbox;
import dev.idem.jdbc.inbox.Received;
import dev.idem.jdbc.internal.InboxAttempts;
import dev.idem.jdbc.outbox.NewMessage;
import dev.idem.key.IdempotencyKey;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadFactory;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Consumes Kafka topics through an {@link Inbox}: polls a batch, applies it with {@link
 * Inbox#receiveAll} keyed by the message id each record carries in a header (the outbox id {@link
 * KafkaPublisher} writes), and commits the offsets only after the database transaction committed
 * (asynchronously; before a partition is revoked and when the loop ends, synchronously).
 * The intent key a record carries ({@value NewMessage#INTENT_HEADER}) is recorded with its id, and
 * a message the effect enqueues carries it on (docs/outbox.md#lineage).
 *
 * <pre>{@code
 * Inbox billing = idem.inbox("billing").build();
 * try (KafkaInbox consumer = KafkaInbox.builder(billing, (tx, record) -> charge(tx, record.value()))
 *     .bootstrapServers("broker:9092").groupId("billing").topics("orders")
 *     .deadLetterTopic("orders.dead").build()) {
 *   consumer.start();
 *   ...
 * }
 * }</pre>
 *
 * <p>Guarantees, per message id: its effect commits once (within the inbox's window), however
 * often the record is delivered: after a consumer crash between the database commit and the offset
 * commit, after a rebalance, after a republish that wrote a second record with the same id at
 * another offset. The offsets committed are, per partition, those past the records whose outcome
 * is settled (applied, a duplicate, or kept as a dead letter); a record that failed or whose copy
 * is in flight elsewhere is not committed past, and the consumer seeks back to it so it is
 * delivered again (the records after it in its partition come again too, as duplicates). Offsets
 * are committed only for partitions this consumer still owns. A rebalance happens only inside a
 * poll, between batches: a batch is always finished (effects and offsets) before its partitions
 * can be revoked, so a revoked partition's new owner starts where this one committed.
 *
 * <p>A record whose effect fails is tried again in later polls, after {@link Builder#retryBackoff},
 * and after {@link Builder#maxAttempts} runs it goes to the {@link DeadLetters} and is committed
 * past. What was delivered and tried is kept in the database next to the inbox, per consumer
 * group, so it survives a restart and a rebalance: each poll's range of offsets per partition
 * ({@code idem_inbox_polls}, migration V5; one row per partition) is committed before any effect
 * runs, and the attempts of the records counted one by one ({@code idem_inbox_attempts}, migration
 * V2; one row per record). A record delivered before that failed or had no outcome (the process
 * died: its range delivered again) makes its partition suspect: in that poll only the partition's
 * first unsettled record runs, alone in its own transaction, its attempt committed before its
 * effect, and the partition's later records are polled again; the other partitions' records run as
 * one batch, first. So a record that kills the process is charged with it and dead-lettered after
 * {@code maxAttempts} (a death inside a batch, where no record can be charged, is not counted), and
 * a failing record slows only its own partition; the records of a suspect range run one at a
 * time until the consumer is past it. A record that ended without failure but is polled again (held
 * back, applied after a failed record, in flight elsewhere) is left out of the range kept after the
 * poll, so it does not make its partition suspect. Before a record goes to the dead
 * letters its id is looked up in the inbox: if its effect committed, it is acknowledged as a
 * duplicate instead (logged, and kept as a row in state {@code E}). A record kept as a dead letter
 * and delivered again (an offset commit lost) is acknowledged, never run or dead-lettered again. A
 * record without a usable id goes to the dead letters at once ({@link WithoutId#DEAD_LETTER}, the
 * default) or gets its position as id ({@link WithoutId#POSITION}).
 *
 * <p>Does not guarantee: the order of effects across partitions; the order within a partition
 * once a record failed (the records after it that applied stay applied while it is retried); an
 * effect outside the database transaction (an HTTP call) runs at most once per delivery, not once.
 * A record arriving after its id's window expired applies again, as for {@link Inbox}.
 *
 * <p>One background thread per {@link #start()}, which owns the Kafka consumer; {@link #close()}
 * stops it within {@link Builder#closeTimeout}.
 */
public final class KafkaInbox implements AutoCloseable {
  /** What to do with a record that carries no usable message id. */
  public enum WithoutId {
    /** Give it to the {@link DeadLetters} with a {@link MissingIdException}; the default. */
    DEAD_LETTER,
    /**
     * Use its position, {@code topic-partition@offset}, as its id. Only for producers that never
     * write a message twice: a republished copy is at another offset, so its effect runs again.
     */
    POSITION
  }

  /** The longest {@linkplain Builder#pollTimeout poll timeout} and {@linkplain Builder#retryBackoff retry back-off}: one minute. */
  public static final Duration MAX_POLL_TIMEOUT = Duration.ofMinutes(1);
  /** The longest {@linkplain Builder#commitTimeout commit} and {@linkplain Builder#closeTimeout close} timeouts: ten minutes. */
  public static final Duration MAX_TIMEOUT = Duration.ofMinutes(10);
  /** The most {@linkplain Builder#maxAttempts attempts} and {@linkplain Builder#maxPollRecords records per poll}. */
  public static final int MAX_ATTEMPTS = 1000;
  public static final int MAX_POLL_RECORDS = 10_000;

  /** The longest group id, in characters (Unicode code points, as MariaDB's utf8mb4 counts them). */
  static final int MAX_GROUP_ID_LENGTH = 255;

  /** Consumer settings this loop decides; a {@link Builder#config} of one of them is refused. */
  private static final Set<String> OWN_SETTINGS = Set.of(
      ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
      ConsumerConfig.GROUP_ID_CONFIG,
      ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
      ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
      ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
      ConsumerConfig.MAX_POLL_RECORDS_CONFIG);

  private static final Logger LOG = LoggerFactory.getLogger("dev.idem.kafka");

  private final Inbox inbox;
  private final BatchEffect<? super ConsumerRecord<byte[], byte[]>> effect;
  private final Map<String, Object> config;
  private final List<String> topics;
  private final String idHeader;
  private final WithoutId withoutId;
  private final int maxAttempts;
  /** The user's dead letters, or null for {@link #deadLetterTopic}. */
  private final DeadLetters givenDeadLetters;
  private final String deadLetterTopic;
  /** For the dead-letter topic's producer, made per {@link #start()}: the user's settings a producer knows. */
  private final Map<String, Object> producerConfig;
  private final Duration pollTimeout;
  private final Duration retryBackoff;
  private final Duration commitTimeout;
  private final Duration closeTimeout;
  private final ThreadFactory threads;

  /** The polls and attempts of this group, kept next to the inbox (idem_inbox_polls, idem_inbox_attempts). */
  private final InboxAttempts attempts;
  /** Where this run's records given up on go; the loop thread's only. */
  private DeadLetters deadLetters;
  /**
   * The offsets handed to {@code commitAsync} in this run, per partition (the latest, which only
   * grow): committed again, synchronously, before a partition is revoked and when the loop ends,
   * so a partition's next owner starts where this consumer's effects ended. The loop thread's only.
   */
  private final Map<TopicPartition, OffsetAndMetadata> sent = new HashMap<>();
  private final Object wake = new Object();
  private Thread loop;
  private volatile boolean running;
  private volatile KafkaConsumer<byte[], byte[]> consumer;

  private KafkaInbox(Builder b) {
    this.inbox = b.inbox;
    this.effect = b.effect;
    Map<String, Object> c = new HashMap<>(b.config);
    // Read from the start when the group has no offset yet: messages relayed before the consumer
    // first ran are not skipped. A user's setting wins.
    c.putIfAbsent(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    c.putIfAbsent(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrapServers);
    c.put(ConsumerConfig.GROUP_ID_CONFIG, b.groupId);
    c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, b.maxPollRecords);
    this.config = Map.copyOf(c);
    this.topics = List.copyOf(b.topics);
    this.idHeader = b.idHeader;
    this.withoutId = b.withoutId;
    this.maxAttempts = b.maxAttempts;
    this.attempts = InboxAttempts.of(b.inbox, b.groupId);
    this.givenDeadLetters = b.deadLetters;
    this.deadLetterTopic = b.deadLetterTopic;
    Map<String, Object> p = new HashMap<>(b.config);
    p.keySet().retainAll(ProducerConfig.configNames()); // security and client settings shared with the consumer
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, b.bootstrapServers);
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    this.producerConfig = Map.copyOf(p);
    this.pollTimeout = b.pollTimeout;
    this.retryBackoff = b.retryBackoff;
    this.commitTimeout = b.commitTimeout;
    this.closeTimeout = b.closeTimeout;
    this.threads = b.threads;
  }

  /**
   * Starts configuring a consumer that applies {@code effect} to each new record through {@code
   * inbox}, in the inbox's transaction.
   */
  public static Builder builder(Inbox inbox, BatchEffect<? super ConsumerRecord<byte[], byte[]>> effect) {
    return new Builder(inbox, effect);
  }

  /** A record's place, {@code topic-partition@offset}: the id under {@link WithoutId#POSITION}, and the dead-letter origin. */
  static String position(ConsumerRecord<?, ?> r) {
    return r.topic() + "-" + r.partition() + "@" + r.offset();
  }

  /**
   * Joins the group and starts consuming on a thread of the {@linkplain Builder#threadFactory thread
   * factory}.
   *
   * @throws IllegalStateException if already running
   * @throws KafkaException if Kafka refuses the consumer's settings
   */
  public synchronized void start() {
    if (loop != null && loop.isAlive()) {
      throw new IllegalStateException("consumer already started (or its previous loop has not ended yet)");
    }
    KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    KafkaProducer<byte[], byte[]> p = deadLetterTopic == null ? null
        : new KafkaProducer<>(producerConfig, new ByteArraySerializer(), new ByteArraySerializer());
    c.subscribe(topics, new Rebalance());
    Thread t = threads.newThread(() -> run(c, p));
    if (t == null) {
      c.close(CloseOptions.timeout(Duration.ZERO));
      if (p != null) {
        p.close(Duration.ZERO);
      }
      throw new IllegalStateException("the consumer's thread factory returned no thread");
    }
    consumer = c;
    running = true;
    loop = t;
    t.start();
  }

  /** Whether the loop runs: started, not closed, its thread alive. */
  public synchronized boolean isRunning() {
    return running && loop != null && loop.isAlive();
  }

  /** The loop of one {@link #start()}: owns {@code c} and the dead-letter producer {@code p} (or null), and closes them. */
  private void run(KafkaConsumer<byte[], byte[]> c, KafkaProducer<byte[], byte[]> p) {
    deadLetters = p == null ? givenDeadLetters : DeadLetters.toTopic(p, deadLetterTopic, commitTimeout);
    try {
      while (running) {
        try {
          ConsumerRecords<byte[], byte[]> records = c.poll(pollTimeout);
          if (!records.isEmpty() && !applyOrRewind(c, records)) {
            pause(retryBackoff);
          }
        } catch (WakeupException | InterruptException e) {
          break; // close()
        } catch (RuntimeException | Error e) {
          Failures.rethrowIfFatal(e);
          LOG.warn("Kafka consumer loop failed; polling again in " + retryBackoff, e);
          pause(retryBackoff);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      try {
        commitSent(c, c.assignment());
      } catch (RuntimeException e) {
        // Woken or interrupted (close() cut the loop short): those records come again as duplicates.
        LOG.warn("could not commit the last offsets before closing; their records are delivered again as duplicates", e);
      }
      sent.clear();
      try {
        // Leaves the group at once, so its partitions move without waiting for the session timeout.
        c.close(CloseOptions.timeout(closeTimeout.dividedBy(10)));
      } catch (RuntimeException e) {
        LOG.warn("could not close the Kafka consumer cleanly", e);
      }
      if (p != null) {
        p.close(closeTimeout.dividedBy(10));
      }
    }
  }

  /**
   * {@link #apply}, and if it fails unexpectedly, a seek back to the batch's first records: the
   * consumer's position is past them since the poll, and without the seek the next poll would skip
   * whatever of them is not settled.
   */
  private boolean applyOrRewind(KafkaConsumer<byte[], byte[]> c, ConsumerRecords<byte[], byte[]> records) {
    try {
      return apply(c, records);
    } catch (WakeupException | InterruptException e) {
      throw e; // closing: the next owner starts from the last commit
    } catch (RuntimeException | Error e) {
      Failures.rethrowIfFatal(e);
      commitAndRewind(c, records, Set.of()); // nothing settled
      throw e;
    }
  }

  /**
   * Applies one poll's records and commits past the settled ones.
   *
   * @return whether every record is settled (else the loop waits the retry back-off)
   */
  private boolean apply(KafkaConsumer<byte[], byte[]> c, ConsumerRecords<byte[], byte[]> records) {
    Map<ConsumerRecord<byte[], byte[]>, String> ids = new IdentityHashMap<>();
    List<ConsumerRecord<byte[], byte[]>> withId = new ArrayList<>(records.count());
    // in the order of the poll, so dead letters keep the order of their partition
    List<Map.Entry<ConsumerRecord<byte[], byte[]>, String>> unusable = new ArrayList<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      String problem = idOf(r, ids);
      if (problem == null) {
        withId.add(r);
      } else {
        unusable.add(Map.entry(r, problem));
      }
    }
    // The poll recorded and committed before any effect runs, in the database: one range of
    // offsets per partition. A range delivered again without an outcome (the process died in the
    // batch) or with a failure shows in the next poll, whichever consumer of the group makes it.
    Map<TopicPartition, InboxAttempts.Range> ranges = new HashMap<>();
    for (TopicPartition tp : records.partitions()) {
      List<ConsumerRecord<byte[], byte[]>> rs = records.records(tp);
      ranges.put(tp, new InboxAttempts.Range(tp.topic(), tp.partition(), rs.get(0).offset(), rs.get(rs.size() - 1).offset()));
    }
    Map<ConsumerRecord<byte[], byte[]>, InboxAttempts.Place> places = new IdentityHashMap<>();
    for (ConsumerRecord<byte[], byte[]> r : withId) {
      places.put(r, new InboxAttempts.Place(r.topic(), r.partition(), r.offset(), ids.get(r)));
    }
    Set<ConsumerRecord<byte[], byte[]>> settled = Collections.newSetFromMap(new IdentityHashMap<>());
    // records given up on, with why; checked against the inbox before they go to the dead letters
    Map<ConsumerRecord<byte[], byte[]>, Exception> givenUp = new IdentityHashMap<>();
    // records to be polled again by their own fault: they failed (their attempt counted), or were given up on
    Set<ConsumerRecord<byte[], byte[]>> charged = Collections.newSetFromMap(new IdentityHashMap<>());
    List<ConsumerRecord<byte[], byte[]>> batch = new ArrayList<>(withId.size());
    // per partition with a suspect record, its first unsettled record: run alone, after the batch
    List<ConsumerRecord<byte[], byte[]>> lone = new ArrayList<>();
    // the records after a lone one in its partition: not run in this poll, polled again
    List<ConsumerRecord<byte[], byte[]>> held = new ArrayList<>();
    Map<TopicPartition, InboxAttempts.Polled> polled = new HashMap<>();
    Set<TopicPartition> suspect = new HashSet<>();
    // partitions whose records are counted one by one: the suspect ones, and those that may deliver
    // again a record settled before (kept as a dead letter, acknowledged), whose state is read
    Set<TopicPartition> counted = new HashSet<>();
    Map<InboxAttempts.Place, InboxAttempts.Count> counts = new HashMap<>();
    try {
      Map<InboxAttempts.Range, InboxAttempts.Polled> written = attempts.poll(new ArrayList<>(ranges.values()));
      for (Map.Entry<TopicPartition, InboxAttempts.Range> e : ranges.entrySet()) {
        InboxAttempts.Polled p = written.get(e.getValue());
        if (p == null) {
          throw new IllegalStateException("idem_inbox_polls returned no row for partition " + e.getKey());
        }
        polled.put(e.getKey(), p);
        if (p.suspect()) {
          suspect.add(e.getKey());
        }
        if (p.suspect() || e.getValue().first() <= p.givenUpOffset()) {
          counted.add(e.getKey());
        }
      }
      List<InboxAttempts.Place> toCount = withId.stream()
          .filter(r -> counted.contains(new TopicPartition(r.topic(), r.partition()))).map(places::get).toList();
      counts.putAll(attempts.count(toCount, false));
    } catch (RuntimeException e) {
      LOG.warn("could not record the deliveries of a batch of " + records.count() + " records (nothing of it ran); they are"
          + " polled again in " + retryBackoff, e);
      commitAndRewind(c, records, Set.of()); // nothing settled
      return false;
    }
    List<ConsumerRecord<byte[], byte[]>> unsettled = new ArrayList<>(withId.size());
    for (ConsumerRecord<byte[], byte[]> r : withId) {
      InboxAttempts.Count n = counts.get(places.get(r));
      if (n != null && n.state() != InboxAttempts.State.ATTEMPTED) {
        // Settled before by this group (its offset commit was lost): a recognised repeat.
        LOG.info("record " + position(r) + " (id " + ids.get(r) + ") was settled before ("
            + (n.state() == InboxAttempts.State.DEAD_LETTER ? "kept as a dead letter" : "its effect had committed") + "); acknowledged");
        settled.add(r);
      } else {
        unsettled.add(r);
      }
    }
    // An earlier delivery of a suspect record had no outcome, or failed (a death is not told apart
    // from a failure here): in its partition one record runs, alone, its attempt counted before its
    // effect, so a record that kills the process is the one blamed; the partition's next records
    // wait for the next poll. Other partitions run as one batch, first, so a death alone leaves
    // them settled.
    Set<TopicPartition> started = new HashSet<>();
    for (ConsumerRecord<byte[], byte[]> r : unsettled) {
      TopicPartition tp = new TopicPartition(r.topic(), r.partition());
      if (!suspect.contains(tp)) {
        batch.add(r);
      } else if (started.add(tp)) {
        lone.add(r);
      } else {
        held.add(r);
      }
    }
    boolean ranAll = run(batch, false, ids, places, counts, settled, givenUp, charged);
    for (ConsumerRecord<byte[], byte[]> r : lone) {
      if (!ranAll) {
        break; // the database failed: the rest come again
      }
      InboxAttempts.Place place = places.get(r);
      try {
        counts.putAll(attempts.count(List.of(place), true));
      } catch (RuntimeException e) {
        LOG.warn("could not count the attempt of record " + position(r) + " (it did not run); polled again in " + retryBackoff, e);
        ranAll = false;
        break;
      }
      if (counts.get(place).attempts() > maxAttempts) {
        givenUp.put(r, new IllegalStateException("its effect was started " + maxAttempts + " times alone without an"
            + " outcome (the consumer died or was stopped during it)"));
        charged.add(r);
      } else {
        ranAll = run(List.of(r), true, ids, places, counts, settled, givenUp, charged);
      }
    }
    settleGivenUp(givenUp, ids, places, settled);
    for (Map.Entry<ConsumerRecord<byte[], byte[]>, String> u : unusable) {
      if (deadLetter(u.getKey(), new MissingIdException(u.getValue()), u.getValue())) {
        settled.add(u.getKey());
      }
    }
    // Per partition whose records come again, or that was suspect or counted: its range still
    // unsettled, from the first record polled again to the last one charged (or, if suspect, the
    // end of the range delivered without an outcome), or settled. Records polled again for no
    // fault of theirs (held back, applied after a failed one, in flight elsewhere, not run because
    // the database failed) are outside it: else they would look suspect at the next poll and run
    // one at a time. A partition whose records all settled needs no write: the next poll starts
    // past its range.
    Map<TopicPartition, Long> rewindTo = new HashMap<>();
    Map<TopicPartition, Long> lastCharged = new HashMap<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      TopicPartition tp = new TopicPartition(r.topic(), r.partition());
      if (!settled.contains(r)) {
        rewindTo.putIfAbsent(tp, r.offset());
        if (charged.contains(r)) {
          lastCharged.put(tp, r.offset());
        }
      }
    }
    List<InboxAttempts.Range> narrowed = new ArrayList<>();
    for (Map.Entry<TopicPartition, InboxAttempts.Range> e : ranges.entrySet()) {
      TopicPartition tp = e.getKey();
      if (rewindTo.containsKey(tp) || counted.contains(tp)) {
        long first = rewindTo.getOrDefault(tp, e.getValue().last() + 1);
        long last = Math.max(suspect.contains(tp) ? polled.get(tp).last() : Long.MIN_VALUE, lastCharged.getOrDefault(tp, Long.MIN_VALUE));
        narrowed.add(new InboxAttempts.Range(tp.topic(), tp.partition(), first, Math.max(last, first - 1)));
      }
    }
    try {
      attempts.narrow(narrowed);
    } catch (RuntimeException e) {
      LOG.warn("could not record which records of " + narrowed.size() + " partitions are polled again by no fault of theirs;"
          + " those partitions may run one record at a time", e);
    }
    commitAndRewind(c, records, settled);
    // the held records are polled again at once; a pause only if one run is to be retried
    return ranAll && settled.size() + held.size() == records.count();
  }

  /**
   * Runs {@code toRun} through the inbox in one transaction, {@code alone} (one record whose
   * attempt is counted already) or as a batch, and sorts the outcomes: settled, failed (charged;
   * given up on after {@link #maxAttempts}).
   *
   * @return false if the transaction failed as a whole (nothing of it committed)
   */
  private boolean run(List<ConsumerRecord<byte[], byte[]>> toRun, boolean alone,
      Map<ConsumerRecord<byte[], byte[]>, String> ids, Map<ConsumerRecord<byte[], byte[]>, InboxAttempts.Place> places,
      Map<InboxAttempts.Place, InboxAttempts.Count> counts, Set<ConsumerRecord<byte[], byte[]>> settled,
      Map<ConsumerRecord<byte[], byte[]>, Exception> givenUp, Set<ConsumerRecord<byte[], byte[]>> charged) {
    if (toRun.isEmpty()) {
      return true;
    }
    Received<ConsumerRecord<byte[], byte[]>> received;
    try {
      received = inbox.receiveAll(toRun, ids::get, KafkaInbox::intentOf, effect);
    } catch (RuntimeException e) {
      // The transaction failed as a whole (a lost database): nothing of it committed, so its
      // records come again, and an attempt counted is taken back where the database answers.
      LOG.warn("the inbox could not apply " + toRun.size() + " records; they are polled again in " + retryBackoff, e);
      if (alone) {
        try {
          attempts.takeBackAttempt(toRun.stream().map(places::get).toList());
        } catch (RuntimeException again) {
          LOG.debug("could not take back the attempt of the failed run; it stays counted", again);
        }
      }
      return false;
    }
    settled.addAll(received.applied());
    settled.addAll(received.duplicates());
    // A failure in a batch is charged after the fact, to a row of its own, created if need be:
    // its next deliveries run it alone, and its attempts count towards maxAttempts.
    List<InboxAttempts.Place> failedInBatch = alone ? List.of()
        : received.failed().stream().map(f -> places.get(f.message())).toList();
    boolean chargedNow = false;
    try {
      counts.putAll(attempts.count(failedInBatch, true));
      chargedNow = true;
      if (alone) {
        attempts.takeBackAttempt(received.inFlight().stream().map(places::get).toList()); // counted, did not run
      }
    } catch (RuntimeException e) {
      LOG.warn("could not count the failures of " + failedInBatch.size() + " records; they are delivered again", e);
    }
    for (Received.Failure<ConsumerRecord<byte[], byte[]>> f : received.failed()) {
      ConsumerRecord<byte[], byte[]> r = f.message();
      charged.add(r);
      InboxAttempts.Count count = counts.get(places.get(r));
      // alone, or charged just now: counted already; else one more than known
      int n = (count == null ? 0 : count.attempts()) + (alone || chargedNow ? 0 : 1);
      if (n >= maxAttempts) {
        givenUp.put(r, f.error());
      } else {
        LOG.warn("the effect of record " + position(r) + " (id " + ids.get(r) + ") failed, attempt " + n + " of "
            + maxAttempts + "; it is delivered again", f.error());
      }
    }
    return true;
  }

  /**
   * Sends the records given up on to the dead letters, except those whose effect committed after
   * all (their id in the inbox: a copy at another offset applied, or the effect committed and the
   * process died before its offset commit), which are duplicates and acknowledged. Marks both in
   * the attempts table.
   */
  private void settleGivenUp(Map<ConsumerRecord<byte[], byte[]>, Exception> givenUp,
      Map<ConsumerRecord<byte[], byte[]>, String> ids, Map<ConsumerRecord<byte[], byte[]>, InboxAttempts.Place> places,
      Set<ConsumerRecord<byte[], byte[]>> settled) {
    Set<String> committed = Set.of();
    if (!givenUp.isEmpty()) {
      try {
        committed = attempts.committed(givenUp.keySet().stream().map(ids::get).toList());
      } catch (RuntimeException e) {
        // Unknown: the records are delivered again, not dead-lettered on a guess.
        LOG.warn("could not read whether " + givenUp.size() + " records given up on had their effects committed; they are"
            + " delivered again", e);
        givenUp.clear();
      }
    }
    List<InboxAttempts.Place> dead = new ArrayList<>();
    List<InboxAttempts.Place> done = new ArrayList<>();
    for (Map.Entry<ConsumerRecord<byte[], byte[]>, Exception> g : givenUp.entrySet()) {
      ConsumerRecord<byte[], byte[]> r = g.getKey();
      if (committed.contains(ids.get(r))) {
        LOG.warn("record " + position(r) + " (id " + ids.get(r) + ") was given up on, but its effect had committed: a duplicate,"
            + " acknowledged and not dead-lettered");
        done.add(places.get(r));
        settled.add(r);
      } else if (deadLetter(r, g.getValue(), "tried " + maxAttempts + " times")) {
        dead.add(places.get(r));
        settled.add(r);
      }
    }
    try {
      attempts.settle(dead, InboxAttempts.State.DEAD_LETTER);
      attempts.settle(done, InboxAttempts.State.EFFECT_COMMITTED);
    } catch (RuntimeException e) {
      // Kept or acknowledged all the same; if these records come again they are checked and kept again.
      LOG.warn("could not record " + (dead.size() + done.size()) + " records as settled in the attempts table", e);
    }
  }

  /**
   * The key of the intent that produced {@code r}, from its {@value NewMessage#INTENT_HEADER}
   * header (as {@link KafkaPublisher} and the Debezium layout write it), for the inbox to record
   * and to pass on to what the effect enqueues; null without one. A value no intent key can be
   * (empty, over 511 characters, not visible ASCII: a foreign producer's) is taken as none and
   * logged, never a reason to refuse the record.
   */
  private static String intentOf(ConsumerRecord<byte[], byte[]> r) {
    Header h = r.headers().lastHeader(NewMessage.INTENT_HEADER);
    if (h == null || h.value() == null) {
      return null;
    }
    String intent = new String(h.value(), StandardCharsets.UTF_8);
    if (intent.isEmpty() || intent.length() > MAX_INTENT_LENGTH || !intent.chars().allMatch(c -> c >= '!' && c <= '~')) {
      LOG.warn("record {} has an '{}' header that is no intent key ({} characters); its intent is not recorded",
          position(r), NewMessage.INTENT_HEADER, intent.length());
      return null;
    }
    return intent;
  }

  /** The longest intent key an inbox records: a key's scope and value (255 characters each) and ':'. */
  private static final int MAX_INTENT_LENGTH = 511;

  /** Puts {@code r} in {@code ids} and returns null, or says why it has no usable id. */
  private String idOf(ConsumerRecord<byte[], byte[]> r, Map<ConsumerRecord<byte[], byte[]>, String> ids) {
    Header h = r.headers().lastHeader(idHeader);
    String id = h == null || h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8);
    String problem;
    if (id == null) {
      problem = "record " + position(r) + " has no '" + idHeader + "' header";
    } else {
      try {
        ids.put(r, IdempotencyKey.check("the '" + idHeader + "' header of record " + position(r), id));
        return null;
      } catch (IllegalArgumentException e) {
        problem = e.getMessage();
      }
    }
    if (withoutId == WithoutId.POSITION) {
      ids.put(r, position(r));
      return null;
    }
    return problem;
  }

  /** Gives {@code r} to the dead letters; whether they kept it. */
  private boolean deadLetter(ConsumerRecord<byte[], byte[]> r, Exception reason, String why) {
    try {
      deadLetters.keep(r, reason);
      LOG.warn("record " + position(r) + " went to the dead letters: " + why, reason);
      return true;
    } catch (Exception e) {
      LOG.warn("could not keep record " + position(r) + " as a dead letter (" + why + "); it is delivered again", e);
      return false;
    }
  }

  /**
   * Commits, per partition still owned, the offset past the records settled in a row from the
   * batch's start, and seeks back to the first one not settled so it is polled again.
   */
  private void commitAndRewind(KafkaConsumer<byte[], byte[]> c, ConsumerRecords<byte[], byte[]> records,
      Set<ConsumerRecord<byte[], byte[]>> settled) {
    Set<TopicPartition> owned = c.assignment();
    Map<TopicPartition, OffsetAndMetadata> commits = new HashMap<>();
    for (TopicPartition tp : records.partitions()) {
      if (!owned.contains(tp)) {
        continue; // its new owner starts from the last commit; never commit for it
      }
      List<ConsumerRecord<byte[], byte[]>> rs = records.records(tp);
      long next = rs.get(rs.size() - 1).offset() + 1;
      for (ConsumerRecord<byte[], byte[]> r : rs) {
        if (!settled.contains(r)) {
          next = r.offset();
          break;
        }
      }
      if (next > rs.get(0).offset()) {
        commits.put(tp, new OffsetAndMetadata(next));
      }
      if (next <= rs.get(rs.size() - 1).offset()) {
        c.seek(tp, next);
      }
    }
    if (commits.isEmpty()) {
      return;
    }
    // Asynchronously: the database transaction has committed, so the offsets only save work (a
    // record they miss comes again and the inbox answers it as a duplicate), and the loop polls the
    // next batch instead of waiting a broker round trip. Before a partition can move to another
    // consumer, its offsets are committed synchronously (Rebalance, and the loop's end).
    sent.putAll(commits);
    c.commitAsync(commits, (offsets, e) -> {
      if (e != null) {
        LOG.warn("could not commit offsets " + offsets + "; those records are delivered again as duplicates", e);
      }
    });
  }

  /**
   * Commits synchronously the offsets sent asynchronously for {@code partitions}: what a partition's
   * next owner starts from. A failure is logged: the records come again, as duplicates.
   */
  private void commitSent(KafkaConsumer<byte[], byte[]> c, Collection<TopicPartition> partitions) {
    Map<TopicPartition, OffsetAndMetadata> commits = new HashMap<>();
    for (TopicPartition tp : partitions) {
      OffsetAndMetadata o = sent.remove(tp);
      if (o != null) {
        commits.put(tp, o);
      }
    }
    if (commits.isEmpty()) {
      return;
    }
    try {
      c.commitSync(commits, commitTimeout);
    } catch (WakeupException | InterruptException e) {
      throw e;
    } catch (KafkaException e) {
      LOG.warn("could not commit offsets " + commits + "; those records are delivered again as duplicates", e);
    }
  }

  private void pause(Duration d) throws InterruptedException {
    synchronized (wake) {
      if (running) {
        wake.wait(Math.max(1, d.toMillis()));
      }
    }
  }

  /** Runs inside the loop's poll, on its thread: between batches, never during one. */
  private final class Rebalance implements ConsumerRebalanceListener {
    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
      // Every batch commits (or rewinds) before the next poll, so nothing is in progress here; its
      // offsets, sent asynchronously, are committed and waited for before the partitions go. The
      // attempts are in the database, where the partitions' next owner finds them.
      KafkaConsumer<byte[], byte[]> c = consumer;
      if (c != null) {
        commitSent(c, partitions);
      }
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
      // Owned by another consumer already: nothing may be committed for them.
      sent.keySet().removeAll(partitions);
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
  }

  /**
   * Stops the loop: the batch in progress finishes (its effects and offsets commit), the consumer
   * leaves its group, and the dead-letter producer this consumer made is closed; {@link #start()}
   * may run it again. Waits at most the
   * {@linkplain Builder#closeTimeout close timeout}: four fifths for the loop to end on its own, then
   * wakes the consumer and interrupts the thread; a batch cut short there commits nothing of its
   * offsets, and its records come again as duplicates. Idempotent.
   */
  @Override
  public void close() {
    Thread t;
    synchronized (this) {
      t = loop;
      running = false;
    }
    if (t != null) {
      synchronized (wake) {
        wake.notifyAll();
      }
      try {
        boolean ended = Stopping.awaitEnd(t, closeTimeout, () -> {
          KafkaConsumer<byte[], byte[]> c = consumer;
          if (c != null) {
            c.wakeup();
          }
          t.interrupt();
        });
        if (!ended) {
          LOG.warn("Kafka consumer loop still runs after the close timeout " + closeTimeout + " (an effect ignores the interrupt)");
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private static final ThreadFactory DAEMON = r -> {
    Thread t = new Thread(r, "idem-kafka-inbox");
    t.setDaemon(true);
    return t;
  };

  /** Configures a {@link KafkaInbox}; validated in {@link #build()}. */
  public static final class Builder {
    private final Inbox inbox;
    private final BatchEffect<? super ConsumerRecord<byte[], byte[]>> effect;
    private final Map<String, Object> config = new HashMap<>();
    private String bootstrapServers;
    private String groupId;
    private List<String> topics = List.of();
    private String idHeader = KafkaPublisher.DEFAULT_ID_HEADER;
    private WithoutId withoutId = WithoutId.DEAD_LETTER;
    private int maxAttempts = 5;
    private DeadLetters deadLetters;
    private String deadLetterTopic;
    private Duration pollTimeout = Duration.ofMillis(500);
    private Duration retryBackoff = Duration.ofSeconds(1);
    private Duration commitTimeout = Duration.ofSeconds(10);
    private Duration closeTimeout = Duration.ofSeconds(10);
    private int maxPollRecords = 500;
    private ThreadFactory threads = DAEMON;

    private Builder(Inbox inbox, BatchEffect<? super ConsumerRecord<byte[], byte[]>> effect) {
      this.inbox = Require.notNull(inbox, "inbox");
      this.effect = Require.notNull(effect, "effect");
    }

    /** The Kafka cluster, {@code host:port,...}; required. */
    public Builder bootstrapServers(String bootstrapServers) {
      this.bootstrapServers = Require.notBlank(bootstrapServers, "bootstrapServers");
      return this;
    }

    /**
     * The consumer group, whose members share the topics' partitions; required, at most 255
     * characters (the keys of the polls and attempts tables hold it, on either database).
     *
     * @throws IllegalArgumentException if blank or longer than 255 characters
     */
    public Builder groupId(String groupId) {
      Require.notBlank(groupId, "groupId");
      int length = groupId.codePointCount(0, groupId.length());
      if (length > MAX_GROUP_ID_LENGTH) {
        // MariaDB's consumer_group is VARCHAR(255): longer would fail every count (strict mode) or
        // be cut, merging groups; refused on PostgreSQL too, so a group works on both.
        throw new IllegalArgumentException("groupId must be at most " + MAX_GROUP_ID_LENGTH + " characters (the"
            + " consumer_group column of idem_inbox_polls and idem_inbox_attempts), was " + length);
      }
      this.groupId = groupId;
      return this;
    }

    /** The topics to consume; at least one. */
    public Builder topics(String... topics) {
      Require.notNull(topics, "topics");
      List<String> list = new ArrayList<>();
      for (int i = 0; i < topics.length; i++) {
        list.add(Require.notBlank(topics[i], "topics[" + i + "]"));
      }
      this.topics = list;
      return this;
    }

    /** The record header carrying the message id; default {@value KafkaPublisher#DEFAULT_ID_HEADER}, as {@link KafkaPublisher} writes it. */
    public Builder idHeader(String idHeader) {
      this.idHeader = Require.notBlank(idHeader, "idHeader");
      return this;
    }

    /** What a record without a usable id gets; default {@link WithoutId#DEAD_LETTER}. */
    public Builder withoutId(WithoutId withoutId) {
      this.withoutId = Require.notNull(withoutId, "withoutId");
      return this;
    }

    /**
     * Runs of a record's effect (failed, or alone and ended by the process's death), counted in the
     * database across the group's consumers, after which it goes to the dead letters; default 5, at
     * most {@value KafkaInbox#MAX_ATTEMPTS}.
     */
    public Builder maxAttempts(int maxAttempts) {
      this.maxAttempts = maxAttempts;
      return this;
    }

    /** Where records given up on go; this or {@link #deadLetterTopic} is required. */
    public Builder deadLetters(DeadLetters deadLetters) {
      this.deadLetters = Require.notNull(deadLetters, "deadLetters");
      this.deadLetterTopic = null;
      return this;
    }

    /**
     * Records given up on go to {@code topic} of the same cluster ({@link DeadLetters#toTopic}),
     * through an idempotent producer ({@code acks=all}) this consumer makes and closes.
     */
    public Builder deadLetterTopic(String topic) {
      this.deadLetterTopic = Require.notBlank(topic, "deadLetterTopic");
      this.deadLetters = null;
      return this;
    }

    /** The longest one poll waits for records; default 500 ms, at most {@link KafkaInbox#MAX_POLL_TIMEOUT}. */
    public Builder pollTimeout(Duration pollTimeout) {
      this.pollTimeout = pollTimeout;
      return this;
    }

    /** The wait after a batch that left records to deliver again (failed, in flight); default 1 s, at most {@link KafkaInbox#MAX_POLL_TIMEOUT}. */
    public Builder retryBackoff(Duration retryBackoff) {
      this.retryBackoff = retryBackoff;
      return this;
    }

    /**
     * The longest a synchronous offset commit (before a partition is revoked, when the loop ends)
     * waits; default 10 s, at most {@link KafkaInbox#MAX_TIMEOUT}.
     */
    public Builder commitTimeout(Duration commitTimeout) {
      this.commitTimeout = commitTimeout;
      return this;
    }

    /** The longest {@link KafkaInbox#close()} waits; default 10 s, at most {@link KafkaInbox#MAX_TIMEOUT}. */
    public Builder closeTimeout(Duration closeTimeout) {
      this.closeTimeout = closeTimeout;
      return this;
    }

    /** The most records per poll, that is per inbox batch; default 500, at most {@value KafkaInbox#MAX_POLL_RECORDS}. */
    public Builder maxPollRecords(int maxPollRecords) {
      this.maxPollRecords = maxPollRecords;
      return this;
    }

    /**
     * Any other consumer setting (security, session timeout, {@code auto.offset.reset}, which
     * defaults to {@code earliest} here...). Refused: bootstrap servers, group id, auto commit,
     * deserializers and max poll records, which have their own methods or are decided here.
     */
    public Builder config(String name, Object value) {
      Require.notBlank(name, "config name");
      if (OWN_SETTINGS.contains(name)) {
        throw new IllegalArgumentException("the consumer setting " + name
            + " is decided by KafkaInbox (manual commits after the database, byte[] records) or set by its builder's methods");
      }
      config.put(name, Require.notNull(value, "config value of " + name));
      return this;
    }

    /** Makes the loop's thread, one per {@link KafkaInbox#start()}; default a daemon thread {@code idem-kafka-inbox}. */
    public Builder threadFactory(ThreadFactory threads) {
      this.threads = Require.notNull(threads, "threadFactory");
      return this;
    }

    /**
     * Checks the settings and builds the consumer (the Kafka consumer itself is made by {@link
     * KafkaInbox#start()}).
     *
     * @throws IllegalArgumentException naming the setting: no bootstrap servers, group or topic, no
     *     dead letters, attempts or records per poll outside 1 to their maximum, a duration not
     *     positive or past its limit
     */
    public KafkaInbox build() {
      if (bootstrapServers == null) {
        throw new IllegalArgumentException("bootstrapServers must be set");
      }
      if (groupId == null) {
        throw new IllegalArgumentException("groupId must be set");
      }
      if (topics.isEmpty()) {
        throw new IllegalArgumentException("topics must name at least one topic");
      }
      if (deadLetters == null && deadLetterTopic == null) {
        throw new IllegalArgumentException("deadLetters or deadLetterTopic must be set: where a record goes after maxAttempts failures");
      }
      if (maxAttempts < 1 || maxAttempts > MAX_ATTEMPTS) {
        throw new IllegalArgumentException("maxAttempts must be 1 to " + MAX_ATTEMPTS + ", was " + maxAttempts);
      }
      if (maxPollRecords < 1 || maxPollRecords > MAX_POLL_RECORDS) {
        throw new IllegalArgumentException("maxPollRecords must be 1 to " + MAX_POLL_RECORDS + ", was " + maxPollRecords);
      }
      checkDuration(pollTimeout, "pollTimeout", MAX_POLL_TIMEOUT);
      checkDuration(retryBackoff, "retryBackoff", MAX_POLL_TIMEOUT);
      checkDuration(commitTimeout, "commitTimeout", MAX_TIMEOUT);
      checkDuration(closeTimeout, "closeTimeout", MAX_TIMEOUT);
      return new KafkaInbox(this);
    }

    private static void checkDuration(Duration d, String what, Duration max) {
      Require.atMost(Require.positive(d, what), max, what, "idem's limit");
    }
  }
}
