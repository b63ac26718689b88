package dev.idem.jdbc.internal;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The one way from {@code Idem} to each tool's factory, so no tool needs a public factory taking
 * the {@link Context}. Each tool class registers its package-private factory here in its static
 * initializer; {@link #make} initializes the tool class first, then calls it (the JDK's
 * "SharedSecrets" pattern). A second registration for a tool is refused, so code that registers
 * first fails the tool's own initialization instead of standing in for it. Not an API.
 */
public final class Factories {
  /** Builds a tool, or its builder, on idem's context. */
  @FunctionalInterface
  public interface Factory<A, R> {
    R make(Context context, A argument);
  }

  private record Entry(Class<?> argument, Class<?> result, Factory<?, ?> factory) {}

  private static final Map<Class<?>, Entry> BY_TOOL = new ConcurrentHashMap<>();

  private Factories() {}

  /** Called once, from {@code tool}'s static initializer. */
  public static <A, R> void register(Class<?> tool, Class<A> argument, Class<R> result, Factory<A, R> factory) {
    if (BY_TOOL.putIfAbsent(tool, new Entry(argument, result, factory)) != null) {
      throw new IllegalStateException(tool.getName() + " has a factory already: a second registration is refused");
    }
  }

  /** Makes what {@code tool} registered, for {@code argument} ({@code null} for a factory of {@code Void}). */
  public static <A, R> R make(Class<?> tool, Class<A> argument, Class<R> result, Context context, A value) {
    Entry entry = BY_TOOL.get(tool);
    if (entry == null) {
      try {
        Class.forName(tool.getName(), true, tool.getClassLoader()); // runs the static initializer that registers
      } catch (ClassNotFoundException e) {
        throw new IllegalStateException(e);
      }
      entry = BY_TOOL.get(tool);
    }
    if (entry == null || entry.argument() != argument || entry.result() != result) {
      throw new IllegalStateException(tool.getName() + " registered no factory of " + argument.getSimpleName()
          + " to " + result.getSimpleName());
    }
    @SuppressWarnings("unchecked")
    Factory<A, R> factory = (Factory<A, R>) entry.factory();
    return result.cast(factory.make(context, value));
  }
}
