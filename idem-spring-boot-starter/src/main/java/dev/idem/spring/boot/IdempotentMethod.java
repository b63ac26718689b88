package dev.idem.spring.boot;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.idem.jackson.JacksonCodec;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.spring.Idempotent;
import java.lang.reflect.Method;
import java.lang.reflect.Type;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Future;
import org.springframework.boot.convert.DurationStyle;
import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.MethodParameter;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.annotation.AnnotatedMethod;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.env.Environment;
import org.springframework.expression.EvaluationException;
import org.springframework.expression.Expression;
import org.springframework.expression.ParseException;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.util.ClassUtils;

/**
 * One {@link Idempotent} service method, read and checked once, when its bean is proxied: where its
 * key comes from (a SpEL expression or the {@link dev.idem.spring.IdempotencyKey} parameter), its
 * scope, its window, the arguments that make its fingerprint, and its return type. Every mistake in
 * the annotation fails here, naming the method and the attribute, so the application does not start.
 */
final class IdempotentMethod {
  /** When {@code window} is empty: the client retry window. */
  static final Duration DEFAULT_WINDOW = Duration.ofHours(24);
  private static final SpelExpressionParser PARSER = new SpelExpressionParser();
  private static final ParameterNameDiscoverer NAMES = new DefaultParameterNameDiscoverer();

  final Method method;
  final String name;
  final String scope;
  final Duration window;
  private final Expression key;
  private final String keySource;
  private final int keyParameter;
  private final int[] fingerprinted;
  private final Type returned;

  private IdempotentMethod(Method method, Idempotent a, Environment environment) {
    this.method = method;
    this.name = ClassUtils.getUserClass(method.getDeclaringClass()).getSimpleName() + "." + method.getName() + "("
        + String.join(", ", java.util.Arrays.stream(method.getParameterTypes()).map(Class::getSimpleName).toList()) + ")";
    if (!a.keyRequired() || a.storedStatuses().length > 0) {
      throw refused("keyRequired and storedStatuses apply to HTTP handler methods only; a service method always"
          + " needs its key and stores its return value");
    }
    int marked = -1;
    AnnotatedMethod annotated = new AnnotatedMethod(method);
    MethodParameter[] parameters = annotated.getMethodParameters();
    for (MethodParameter p : parameters) {
      if (p.hasParameterAnnotation(dev.idem.spring.IdempotencyKey.class)) {
        if (marked >= 0) {
          throw refused("parameters " + marked + " and " + p.getParameterIndex() + " are both marked @IdempotencyKey;"
              + " mark one, or set key = \"...\" (a SpEL expression over the arguments) instead");
        }
        marked = p.getParameterIndex();
      }
    }
    if (!a.key().isEmpty() && marked >= 0) {
      throw refused("key = \"" + a.key() + "\" and the @IdempotencyKey parameter " + marked + " both name the key:"
          + " keep one");
    }
    if (a.key().isEmpty() && marked < 0) {
      throw refused("no key: set key = \"#order.id\" (a SpEL expression over the arguments, by name or as #p0) or"
          + " mark the parameter that holds it @IdempotencyKey");
    }
    this.keyParameter = marked;
    this.keySource = a.key();
    try {
      this.key = a.key().isEmpty() ? null : PARSER.parseExpression(a.key());
    } catch (ParseException e) {
      throw refused("key = \"" + a.key() + "\" is not a valid SpEL expression: " + e.getMessage(), e);
    }
    List<Integer> rest = new ArrayList<>();
    for (int i = 0; i < parameters.length; i++) {
      if (i != marked) {
        rest.add(i);
      }
    }
    this.fingerprinted = rest.stream().mapToInt(Integer::intValue).toArray();
    this.scope = a.scope().isEmpty() ? ClassUtils.getUserClass(method.getDeclaringClass()).getName() + "." + method.getName()
        : a.scope();
    try {
      IdempotencyKey.check("scope", scope);
    } catch (IllegalArgumentException e) {
      throw refused(a.scope().isEmpty() ? "the default scope (class and method name) is not a valid scope: " + e.getMessage()
          + "; set scope = \"...\"" : "scope = \"" + a.scope() + "\": " + e.getMessage(), e);
    }
    this.window = window(a.window(), environment);
    Class<?> type = method.getReturnType();
    if (Future.class.isAssignableFrom(type) || CompletionStage.class.isAssignableFrom(type)
        || type.getName().equals("org.reactivestreams.Publisher") || hasInterface(type, "org.reactivestreams.Publisher")) {
      throw refused("it returns a " + type.getSimpleName() + ", which completes after the call returns, apart from the"
          + " key's transaction: return the value itself");
    }
    this.returned = type == void.class ? null : method.getGenericReturnType();
  }

  /** The method, checked; {@code null} if it has no {@link Idempotent}. */
  static IdempotentMethod of(Method method, Environment environment) {
    Idempotent a = AnnotatedElementUtils.findMergedAnnotation(method, Idempotent.class);
    return a == null ? null : new IdempotentMethod(method, a, environment);
  }

  private Duration window(String text, Environment environment) {
    if (text.isEmpty()) {
      return DEFAULT_WINDOW;
    }
    String resolved;
    try {
      resolved = environment.resolveRequiredPlaceholders(text);
    } catch (IllegalArgumentException e) {
      throw refused("window = \"" + text + "\": " + e.getMessage(), e);
    }
    Duration d;
    try {
      d = DurationStyle.detectAndParse(resolved.trim());
    } catch (IllegalArgumentException e) {
      throw refused("window = \"" + text + "\"" + (resolved.equals(text) ? "" : " (\"" + resolved + "\")")
          + " is not a duration: write it as 24h, 7d or PT24H", e);
    }
    if (d.isNegative() || d.isZero()) {
      throw refused("window = \"" + text + "\" must be positive");
    }
    return d;
  }

  private static boolean hasInterface(Class<?> type, String name) {
    for (Class<?> i : ClassUtils.getAllInterfacesForClassAsSet(type)) {
      if (i.getName().equals(name)) {
        return true;
      }
    }
    return false;
  }

  /** The key of a call with {@code args}. */
  IdempotencyKey key(Object[] args) {
    Object value;
    String source;
    if (key != null) {
      source = "key = \"" + keySource + "\"";
      try {
        value = key.getValue(new MethodBasedEvaluationContext(null, method, args, NAMES));
      } catch (EvaluationException e) {
        throw new IllegalArgumentException("@Idempotent on " + name + ": " + source + " failed: " + e.getMessage(), e);
      }
    } else {
      source = "the @IdempotencyKey parameter " + keyParameter;
      value = args[keyParameter];
    }
    if (value == null) {
      throw new IllegalArgumentException("@Idempotent on " + name + ": " + source + " gave null; a call needs its key");
    }
    try {
      return IdempotencyKey.of(scope, value.toString());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("@Idempotent on " + name + ": " + source + " gave an invalid key: " + e.getMessage(), e);
    }
  }

  /**
   * The fingerprint of a call: the arguments other than the key parameter, as JSON in order, every
   * object's fields sorted by name (so field order does not matter), hashed.
   */
  Fingerprint fingerprint(Object[] args, ObjectMapper canonical) {
    List<Object> values = new ArrayList<>(fingerprinted.length);
    for (int i : fingerprinted) {
      values.add(args[i]);
    }
    try {
      // As a tree of maps first: sorting by key applies to maps, whatever order a class declares.
      return Fingerprint.of(canonical.writeValueAsBytes(canonical.convertValue(values, Object.class)));
    } catch (Exception e) {
      throw new IllegalArgumentException("@Idempotent on " + name + ": the arguments (the request's fingerprint) cannot"
          + " be written as JSON: " + e.getMessage() + "; mark the key parameter @IdempotencyKey, or pass values"
          + " Jackson can write", e);
    }
  }

  /** How the return value is stored: none for void, else JSON of the generic return type. */
  @SuppressWarnings("unchecked")
  Codec<Object> codec(ObjectMapper mapper) {
    if (returned == null) {
      return (Codec<Object>) (Codec<?>) Codec.none();
    }
    TypeReference<Object> type = new TypeReference<>() {
      @Override
      public Type getType() {
        return returned;
      }
    };
    return mapper == null ? JacksonCodec.of(type) : JacksonCodec.of(mapper, type);
  }

  private IllegalStateException refused(String why) {
    return refused(why, null);
  }

  private IllegalStateException refused(String why, Exception cause) {
    return new IllegalStateException("@Idempotent on " + (name == null ? method.toString() : name) + ": " + why, cause);
  }
}
