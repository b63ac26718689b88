package dev.idem.spring;

import dev.idem.jdbc.outbox.Relay;
import org.springframework.context.SmartLifecycle;

/**
 * Runs a {@link Relay}'s background loop with the application context: started once every bean is
 * ready (so idem's migrations ran), stopped before the DataSource closes, with the relay's bounded
 * {@linkplain Relay.Builder#shutdownTimeout shutdown timeout}; a context that is stopped and
 * started again restarts it.
 */
public final class RelayLifecycle implements SmartLifecycle {
  private final Relay relay;
  private final boolean autoStartup;

  /** Manages {@code relay}, started with the context if {@code autoStartup}. */
  public RelayLifecycle(Relay relay, boolean autoStartup) {
    if (relay == null) {
      throw new IllegalArgumentException("relay must not be null");
    }
    this.relay = relay;
    this.autoStartup = autoStartup;
  }

  /** The relay this runs. */
  public Relay relay() {
    return relay;
  }

  @Override
  public void start() {
    if (!relay.isRunning()) {
      relay.start();
    }
  }

  @Override
  public void stop() {
    relay.close();
  }

  @Override
  public boolean isRunning() {
    return relay.isRunning();
  }

  @Override
  public boolean isAutoStartup() {
    return autoStartup;
  }
}
