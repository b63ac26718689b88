package dev.idem.spring.boot;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.type.TypeFactory;
import dev.idem.jackson.JacksonCodec;
import dev.idem.key.Fingerprint;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.spring.Idempotent;
import dev.idem.window.DedupeWindow;
import java.lang.reflect.Method;
import java.lang.reflect.Type;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Future;
import org.springframework.boot.convert.DurationStyle;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.MethodParameter;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.core.ResolvableType;
import org.springframework.core.annotation.AnnotatedMethod;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.env.Environment;
import org.springframework.expression.EvaluationException;
import org.springframework.expression.Expression;
import org.springframework.expression.ParseException;
import org.springframework.expression.spel.SpelNode;
import org.springframework.expression.spel.ast.BeanReference;
import org.springframework.expression.spel.ast.ConstructorReference;
import org.springframework.expression.spel.standard.SpelExpression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.expression.spel.support.SimpleEvaluationContext;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.annotation.AnnotationTransactionAttributeSource;
import org.springframework.transaction.interceptor.DefaultTransactionAttribute;
import org.springframework.transaction.interceptor.TransactionAttribute;
import org.springframework.transaction.interceptor.TransactionAttributeSource;
import org.springframework.util.ClassUtils;

/**
 * One {@link Idempotent} service method of one bean class, read and checked once, when its bean is
 * proxied: where its key comes from (a SpEL expression or the {@link dev.idem.spring.IdempotencyKey}
 * parameter), its scope, its window, the arguments that make its fingerprint, its return type
 * (resolved against the bean's class, so a generic base class's {@code T} is the subclass's type)
 * and the Spring transaction it runs in. Every mistake in the annotation fails here, naming the
 * method and the attribute, so the application does not start.
 */
final class IdempotentMethod {
  /** When {@code window} is empty: the client retry window. */
  static final DedupeWindow DEFAULT_WINDOW = DedupeWindow.CLIENT_RETRY;
  private static final SpelExpressionParser PARSER = new SpelExpressionParser();
  private static final ParameterNameDiscoverer NAMES = new DefaultParameterNameDiscoverer();
  /** The method's own {@code @Transactional}, read as Spring's advice reads it (any visibility). */
  private static final TransactionAttributeSource TRANSACTIONAL = new AnnotationTransactionAttributeSource(false);

  final Method method;
  final String name;
  final String scope;
  final DedupeWindow window;
  /** The Spring transaction the call begins when none is open: the method's own, or REQUIRED. */
  final TransactionAttribute transaction;
  private final Expression key;
  private final int keyParameter;
  /** The key's origin as an error names it: the expression or the marked parameter. */
  private final String keyOrigin;
  /** True if the marked parameter's declared type already passed {@link #isKeyType}: no check per call. */
  private final boolean keyTypeKnown;
  /** The variables each argument is bound to: {@code p0}/{@code a0} and its name if known, per argument. */
  private final String[][] variables;
  private final int[] fingerprinted;
  private final ResolvableType returned;

  private IdempotentMethod(Method method, Class<?> targetClass, Idempotent a, Environment environment) {
    this.method = method;
    Class<?> bean = ClassUtils.getUserClass(targetClass);
    this.name = bean.getSimpleName() + "." + method.getName() + "("
        + String.join(", ", java.util.Arrays.stream(method.getParameterTypes()).map(Class::getSimpleName).toList()) + ")";
    if (!a.keyRequired() || a.storedStatuses().length > 0) {
      throw refused("keyRequired and storedStatuses apply to HTTP handler methods only; a service method always"
          + " needs its key and stores its return value", "Remove keyRequired and storedStatuses from this annotation.");
    }
    int marked = -1;
    AnnotatedMethod annotated = new AnnotatedMethod(method);
    MethodParameter[] parameters = annotated.getMethodParameters();
    for (MethodParameter p : parameters) {
      if (p.hasParameterAnnotation(dev.idem.spring.IdempotencyKey.class)) {
        if (marked >= 0) {
          throw refused("parameters " + marked + " and " + p.getParameterIndex() + " are both marked @IdempotencyKey",
              "Mark one, or set key = \"...\" (a SpEL expression over the arguments) instead.");
        }
        marked = p.getParameterIndex();
      }
    }
    if (!a.key().isEmpty() && marked >= 0) {
      throw refused("key = \"" + a.key() + "\" and the @IdempotencyKey parameter " + marked + " both name the key",
          "Keep one.");
    }
    if (a.key().isEmpty() && marked < 0) {
      throw refused("no key", "Set key = \"#order.id\" (a SpEL expression over the arguments, by name or as #p0),"
          + " or mark the parameter that holds it @IdempotencyKey.");
    }
    this.keyParameter = marked;
    this.keyOrigin = marked >= 0 ? "the @IdempotencyKey parameter " + marked : "key = \"" + a.key() + "\"";
    this.keyTypeKnown = marked >= 0 && isKeyType(ClassUtils.resolvePrimitiveIfNecessary(parameters[marked].getParameterType()));
    String[] parameterNames = NAMES.getParameterNames(method);
    this.variables = new String[parameters.length][];
    for (int i = 0; i < parameters.length; i++) {
      variables[i] = parameterNames != null && parameterNames[i] != null
          ? new String[] {"p" + i, "a" + i, parameterNames[i]} : new String[] {"p" + i, "a" + i};
    }
    try {
      this.key = a.key().isEmpty() ? null : PARSER.parseExpression(a.key());
    } catch (ParseException e) {
      throw refused("key = \"" + a.key() + "\" is not a valid SpEL expression: " + e.getMessage(),
          "Write a SpEL expression over the arguments, such as #order.id or #p0.", e);
    }
    if (key instanceof SpelExpression spel && reachesBeyondArguments(spel.getAST())) {
      throw refused("key = \"" + a.key() + "\" names a type (T(...)), a constructor (new ...) or a bean (@...)",
          "A key expression reads the arguments only: write one such as #order.id or #p0.");
    }
    if (marked >= 0 && !keyTypeMayBe(ClassUtils.resolvePrimitiveIfNecessary(parameters[marked].getParameterType()))) {
      throw refused(keyTypeRefused("the @IdempotencyKey parameter " + marked, parameters[marked].getParameterType()),
          KEY_TYPES + ".");
    }
    List<Integer> rest = new ArrayList<>();
    for (int i = 0; i < parameters.length; i++) {
      if (i != marked) {
        rest.add(i);
      }
    }
    this.fingerprinted = rest.stream().mapToInt(Integer::intValue).toArray();
    this.scope = a.scope().isEmpty() ? bean.getName() + "." + method.getName() : a.scope();
    try {
      IdempotencyKey.check("scope", scope);
    } catch (IllegalArgumentException e) {
      throw refused(a.scope().isEmpty() ? "the default scope (bean class and method name) is not a valid scope: " + e.getMessage()
          : "scope = \"" + a.scope() + "\": " + e.getMessage(), "Set scope = \"...\" to a valid scope.", e);
    }
    DedupeWindow declared = window("@Idempotent on " + name + ": window =", a.window(), environment);
    this.window = declared == null ? DEFAULT_WINDOW : declared;
    Class<?> type = method.getReturnType();
    if (Future.class.isAssignableFrom(type) || CompletionStage.class.isAssignableFrom(type)
        || type.getName().equals("org.reactivestreams.Publisher") || hasInterface(type, "org.reactivestreams.Publisher")) {
      throw refused("it returns a " + type.getSimpleName() + ", which completes after the call returns, apart from the"
          + " key's transaction", "Return the value itself.");
    }
    this.returned = type == void.class ? null : ResolvableType.forMethodReturnType(method, bean);
    if (returned != null) {
      String unresolved = unresolved(returned);
      if (unresolved != null) {
        throw refused("its return type " + method.getGenericReturnType().getTypeName() + " leaves " + unresolved
            + " unresolved on " + bean.getName() + ", so a repeat could not decode the stored value", "Declare the"
            + " type in the class (class " + bean.getSimpleName() + " extends Base<Receipt>), or return a concrete type.");
      }
    }
    this.transaction = transaction(TRANSACTIONAL.getTransactionAttribute(method, bean));
  }

  /** The method as called on {@code targetClass}, checked; {@code null} if it has no {@link Idempotent}. */
  static IdempotentMethod of(Method method, Class<?> targetClass, Environment environment) {
    Idempotent a = AnnotatedElementUtils.findMergedAnnotation(method, Idempotent.class);
    return a == null ? null : new IdempotentMethod(method, targetClass, a, environment);
  }

  /**
   * The transaction the call begins when none is open: the method's {@code @Transactional} (its
   * isolation, timeout, transaction manager), else REQUIRED. Refused here: what would commit the
   * method's writes apart from its key, or forbid the key's write.
   */
  private TransactionAttribute transaction(TransactionAttribute declared) {
    if (declared == null) {
      DefaultTransactionAttribute d = new DefaultTransactionAttribute(TransactionDefinition.PROPAGATION_REQUIRED);
      d.setName(name);
      return d;
    }
    int propagation = declared.getPropagationBehavior();
    if (propagation != TransactionDefinition.PROPAGATION_REQUIRED && propagation != TransactionDefinition.PROPAGATION_SUPPORTS
        && propagation != TransactionDefinition.PROPAGATION_MANDATORY) {
      throw refused("@Transactional(propagation = " + propagationName(propagation) + ") would run the method apart from"
          + " the transaction of its key (committing its writes apart, or without one)", "Use REQUIRED (the default),"
          + " or put @Idempotent on a method that calls this one.");
    }
    if (declared.isReadOnly()) {
      throw refused("@Transactional(readOnly = true): idem writes the key in the method's transaction", "Drop readOnly.");
    }
    if (propagation == TransactionDefinition.PROPAGATION_SUPPORTS) {
      // SUPPORTS runs without a transaction when none is open, and the key needs one.
      DefaultTransactionAttribute required = new DefaultTransactionAttribute(declared);
      required.setPropagationBehavior(TransactionDefinition.PROPAGATION_REQUIRED);
      return required;
    }
    return declared;
  }

  private static String propagationName(int propagation) {
    for (org.springframework.transaction.annotation.Propagation p : org.springframework.transaction.annotation.Propagation.values()) {
      if (p.value() == propagation) {
        return p.name();
      }
    }
    return String.valueOf(propagation);
  }

  /** The first type variable left in {@code type}, or null if it resolves in full. */
  private static String unresolved(ResolvableType type) {
    if (type.resolve() == null) {
      return type.getType().getTypeName();
    }
    if (type.isArray()) {
      return unresolved(type.getComponentType());
    }
    if (type.getType() instanceof Class<?>) {
      return null; // as declared: no type arguments (a raw type is read as Jackson reads it)
    }
    for (ResolvableType generic : type.getGenerics()) {
      String u = unresolved(generic);
      if (u != null) {
        return u;
      }
    }
    return null;
  }

  /** {@code type} for Jackson, every type variable resolved (see {@link #unresolved}). */
  private static JavaType javaType(TypeFactory types, ResolvableType type) {
    if (type.isArray()) {
      return types.constructArrayType(javaType(types, type.getComponentType()));
    }
    ResolvableType[] generics = type.getType() instanceof Class<?> ? new ResolvableType[0] : type.getGenerics();
    if (generics.length == 0) {
      return types.constructType(type.resolve());
    }
    JavaType[] arguments = new JavaType[generics.length];
    for (int i = 0; i < generics.length; i++) {
      arguments[i] = javaType(types, generics[i]);
    }
    return types.constructParametricType(type.resolve(), arguments);
  }

  /** True if the AST reaches beyond the arguments: a type, a constructor or a bean. */
  private static boolean reachesBeyondArguments(SpelNode node) {
    if (node instanceof org.springframework.expression.spel.ast.TypeReference || node instanceof ConstructorReference || node instanceof BeanReference) {
      return true;
    }
    for (int i = 0; i < node.getChildCount(); i++) {
      if (reachesBeyondArguments(node.getChild(i))) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether a key of static type {@code type} may repeat: false only where the type tells it
   * cannot (a concrete class whose text is {@code Object.toString()}, a new key every call).
   */
  private static boolean keyTypeMayBe(Class<?> type) {
    return type.isInterface() || java.lang.reflect.Modifier.isAbstract(type.getModifiers()) || type == Object.class
        || isKeyType(type);
  }

  /**
   * A key's value repeats as text: a CharSequence, Number, UUID or Enum, or a class that declares
   * its own {@code toString()} (a record does). {@code Object.toString()} names the instance, not
   * the value: two calls with equal arguments would get two keys.
   */
  private static boolean isKeyType(Class<?> type) {
    return KEY_TYPE.get(type);
  }

  /** {@link #isKeyType}, computed once per class: a key's class is checked on every call. */
  private static final ClassValue<Boolean> KEY_TYPE = new ClassValue<>() {
    @Override
    protected Boolean computeValue(Class<?> type) {
      if (CharSequence.class.isAssignableFrom(type) || Number.class.isAssignableFrom(type) || UUID.class == type
          || Enum.class.isAssignableFrom(type)) {
        return true;
      }
      try {
        // The same rule as Fingerprint's: the public toString() the class has is not Object's.
        return type.getMethod("toString").getDeclaringClass() != Object.class;
      } catch (NoSuchMethodException never) {
        return false; // every class has Object's public toString(); an interface is never a value's class
      }
    }
  };

  /** What to give as a key instead of a type {@link #keyTypeRefused} names. */
  private static final String KEY_TYPES = "Use a String, Number, UUID, enum or record, or a class with its own"
      + " toString() (or set key = \"#order.id\" to a field that is one)";

  /** Why {@code source}, of {@code type}, cannot be a key (without the fix, {@link #KEY_TYPES}). */
  private static String keyTypeRefused(String source, Class<?> type) {
    return source + " is a " + type.getName() + ", which does not declare toString(): Object's names the instance,"
        + " so every call would get a new key";
  }

  /**
   * An {@link Idempotent#window} (of a service method or an HTTP handler) as a window: placeholders
   * resolved, then read as 24h, 7d or PT24H, then checked by {@link DedupeWindow#of(Duration)}; null
   * when empty (each caller has its own default). Every error begins with {@code attribute}: where
   * the annotation is and how the message names the attribute.
   */
  static DedupeWindow window(String attribute, String text, Environment environment) {
    if (text.isEmpty()) {
      return null;
    }
    String resolved;
    try {
      resolved = environment.resolveRequiredPlaceholders(text);
    } catch (IllegalArgumentException e) {
      throw new IdemSetupException(attribute + " \"" + text + "\": " + e.getMessage(), "Define the property, or write"
          + " the window as 24h, 7d or PT24H.", e);
    }
    String named = attribute + " \"" + text + "\"" + (resolved.equals(text) ? "" : " (\"" + resolved + "\")");
    Duration d;
    try {
      d = DurationStyle.detectAndParse(resolved.trim());
    } catch (IllegalArgumentException e) {
      throw new IdemSetupException(named + " is not a duration", "Write the window as a duration, such as \"24h\","
          + " \"7d\" or \"${payments.window}\".", e);
    }
    try {
      return DedupeWindow.of(d);
    } catch (IllegalArgumentException e) {
      throw new IdemSetupException(named + " is not a window: " + e.getMessage(), "Write a positive duration, such as"
          + " 24h.", e);
    }
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
    String source = keyOrigin;
    if (key != null) {
      try {
        value = key.getValue(arguments(args));
      } catch (EvaluationException e) {
        throw new IllegalArgumentException("@Idempotent on " + name + ": " + source + " failed: " + e.getMessage(), e);
      }
    } else {
      value = args[keyParameter];
    }
    if (value == null) {
      throw new IllegalArgumentException("@Idempotent on " + name + ": " + source + " gave null; a call needs its key");
    }
    if (!keyTypeKnown && !isKeyType(value.getClass())) {
      throw new IllegalArgumentException("@Idempotent on " + name + ": " + keyTypeRefused(source, value.getClass())
          + ". " + KEY_TYPES);
    }
    try {
      return IdempotencyKey.of(scope, value.toString());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("@Idempotent on " + name + ": " + source + " gave an invalid key: " + e.getMessage(), e);
    }
  }

  /**
   * The arguments as variables, and nothing else: by name ({@code #order}, when the class was
   * compiled with {@code -parameters}), as {@code #p0} and as {@code #a0}. Read-only data binding:
   * properties and the arguments' own methods, no types, constructors or beans.
   */
  private SimpleEvaluationContext arguments(Object[] args) {
    SimpleEvaluationContext context = SimpleEvaluationContext.forReadOnlyDataBinding().withInstanceMethods().build();
    for (int i = 0; i < args.length; i++) {
      for (String variable : variables[i]) {
        context.setVariable(variable, args[i]);
      }
    }
    return context;
  }

  /**
   * The fingerprints' mapper, idem's own and never the application's: a fingerprint must not change
   * with the application's Jackson settings or its Jackson version (a repeat after a deploy would
   * then be refused as another request). The modules found on the class path (java.time), map
   * entries by key, dates and durations as ISO text.
   */
  private static final ObjectMapper CANONICAL = JsonMapper.builder().findAndAddModules()
      .enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS)
      .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS)
      .disable(SerializationFeature.WRITE_DURATIONS_AS_TIMESTAMPS)
      .build();

  /**
   * The fingerprint of a call: the arguments other than the key parameter, as JSON in order, every
   * object's fields and every map's entries sorted by name (so their order does not matter), hashed.
   * A collection is written in its iteration order, a set's too: pass a sorted set, or a list.
   */
  Fingerprint fingerprint(Object[] args) {
    List<Object> values = new ArrayList<>(fingerprinted.length);
    for (int i : fingerprinted) {
      values.add(args[i]);
    }
    try {
      // As a tree of maps first: sorting by key applies to maps, whatever order a class declares.
      return Fingerprint.of(CANONICAL.writeValueAsBytes(CANONICAL.convertValue(values, Object.class)));
    } catch (Exception e) {
      throw new IllegalArgumentException("@Idempotent on " + name + ": the arguments (the request's fingerprint) cannot"
          + " be written as JSON: " + e.getMessage() + "; mark the key parameter @IdempotencyKey, or pass values"
          + " Jackson can write", e);
    }
  }

  /**
   * How the return value is stored: none for void, else JSON of the return type as the bean's class
   * resolves it.
   */
  @SuppressWarnings("unchecked")
  Codec<Object> codec(ObjectMapper mapper) {
    if (returned == null) {
      return (Codec<Object>) (Codec<?>) Codec.none();
    }
    JavaType resolved = javaType(mapper == null ? TypeFactory.defaultInstance() : mapper.getTypeFactory(), returned);
    TypeReference<Object> type = new TypeReference<>() {
      @Override
      public Type getType() {
        return resolved; // a JavaType is a Type, which Jackson takes as it is
      }
    };
    return mapper == null ? JacksonCodec.of(type) : JacksonCodec.of(mapper, type);
  }

  private IdemSetupException refused(String why, String fix) {
    return refused(why, fix, null);
  }

  /** A bad annotation: {@code why} names the attribute, {@code fix} says what to write instead. */
  private IdemSetupException refused(String why, String fix, Exception cause) {
    return new IdemSetupException("@Idempotent on " + (name == null ? method.toString() : name) + ": " + why, fix, cause);
  }
}
