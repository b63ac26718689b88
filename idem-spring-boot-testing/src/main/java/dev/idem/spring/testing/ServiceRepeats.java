package dev.idem.spring.testing;

import dev.idem.testing.Effects;
import dev.idem.testing.FaultyDataSource;
import dev.idem.testing.Repeats;
import javax.sql.DataSource;
import org.springframework.beans.factory.BeanFactory;

/**
 * {@link Repeats} on the application under test, a bean of every {@link AutoConfigureIdemTest}
 * context: the effects are counted in the application's own database, and its commits can be
 * killed, because its {@code DataSource} is behind a {@link FaultyDataSource}.
 *
 * <pre>{@code
 * @Autowired ServiceRepeats repeats;
 * @LocalServerPort int port;
 *
 * repeats.effectsIn("payments", "order_id")
 *     .target(Targets.http(copy -> HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/payments"))
 *         .header("Idempotency-Key", copy.key())
 *         .header("Content-Type", "application/json")
 *         .POST(BodyPublishers.ofString("{\"order\":\"" + copy.intent() + "\",\"amount\":5}")).build()))
 *     .deliver(Delivery.CONCURRENT, Delivery.REPLY_LOST, Delivery.KILLED_BEFORE_COMMIT, Delivery.KILLED_AFTER_COMMIT)
 *     .run()
 *     .assertOneEffectPerIntent();
 * }</pre>
 *
 * <p>Background writers on the same pool (idem's outbox relay, schedulers) commit too while a
 * killing delivery runs and may take its kill: switch them off in such a test ({@code
 * idem.relay.enabled=false}).
 */
public final class ServiceRepeats {
  private final BeanFactory beans;

  ServiceRepeats(BeanFactory beans) {
    this.beans = beans;
  }

  /**
   * New {@link Repeats} counting one effect per intent in {@code table}, by the business key in
   * {@code keyColumn}, with the application's {@code DataSource} as its {@link Repeats#faults}.
   *
   * @throws IllegalArgumentException if the table or the column does not exist, naming it
   */
  public Repeats effectsIn(String table, String keyColumn) {
    FaultyDataSource service = dataSource();
    return Repeats.of(Effects.in(service, table, keyColumn)).faults(service);
  }

  /** The application's {@code DataSource}, as the kit wraps it. */
  public FaultyDataSource dataSource() {
    DataSource ds = beans.getBean(DataSource.class);
    if (ds instanceof FaultyDataSource faulty) {
      return faulty;
    }
    throw new IllegalStateException("the application's DataSource bean is a " + ds.getClass().getName()
        + ", not the FaultyDataSource @AutoConfigureIdemTest wraps it in: was it registered as an instance after the context started?");
  }
}
