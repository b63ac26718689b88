package dev.idem.spring.boot;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.json.JsonMapper;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.result.Codec;
import dev.idem.spring.Idempotent;
import dev.idem.window.DedupeWindow;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.aopalliance.aop.Advice;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.springframework.aop.Pointcut;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.AopUtils;
import org.springframework.aop.support.StaticMethodMatcherPointcut;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.core.BridgeMethodResolver;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.env.Environment;
import org.springframework.stereotype.Controller;

/**
 * Runs every {@link Idempotent} method of a Spring bean (not a controller's: the HTTP filter guards
 * handlers) through an idem executor: the key from the annotation, the other arguments as the
 * fingerprint, the return value stored as JSON. A repeat returns the stored value without running
 * the method; another fingerprint under the key throws {@code KeyReuseException}; a copy still in
 * flight after the executor's wait throws {@code InFlightException}; the method's own exception
 * (checked or not) is thrown as it was, and the key rolls back with its writes.
 *
 * <p>Each method is read and checked when its bean is proxied (so a bad annotation stops start-up);
 * the {@code Idem} bean, the mapper and the executors are looked up at the first call, so this
 * advisor, made early by the auto-proxy creator, pulls nothing else early.
 */
final class IdempotentMethods extends AbstractPointcutAdvisor implements MethodInterceptor {
  private final Pointcut pointcut = new StaticMethodMatcherPointcut() {
    {
      setClassFilter(type -> !AnnotatedElementUtils.hasAnnotation(type, Controller.class));
    }

    @Override
    public boolean matches(Method method, Class<?> targetClass) {
      return plan(method, targetClass) != null;
    }
  };
  private final ObjectProvider<Idem> idem;
  private final ObjectProvider<ObjectMapper> mappers;
  private final Environment environment;
  private final Map<Method, IdempotentMethod> methods = new ConcurrentHashMap<>();
  private final Map<Method, Codec<Object>> codecs = new ConcurrentHashMap<>();
  private final Map<Duration, IdempotentExecutor> executors = new ConcurrentHashMap<>();
  /** The application's mapper (null: JacksonCodec's own) and the fingerprints', found at the first call. */
  private volatile Mappers found;

  private record Mappers(ObjectMapper application, ObjectMapper canonical) {}

  IdempotentMethods(ObjectProvider<Idem> idem, ObjectProvider<ObjectMapper> mappers, Environment environment) {
    this.idem = idem;
    this.mappers = mappers;
    this.environment = environment;
    setOrder(LOWEST_PRECEDENCE); // inside @Transactional's advice when both apply (either way, one transaction)
  }

  /** Every {@link Idempotent} method of a bean that is not a controller. */
  @Override
  public Pointcut getPointcut() {
    return pointcut;
  }

  @Override
  public Advice getAdvice() {
    return this;
  }

  /** The method as called on {@code targetClass}, read and checked once; null if not annotated. */
  private IdempotentMethod plan(Method method, Class<?> targetClass) {
    Method specific = BridgeMethodResolver.findBridgedMethod(AopUtils.getMostSpecificMethod(method, targetClass));
    IdempotentMethod known = methods.get(specific);
    if (known != null) {
      return known;
    }
    IdempotentMethod read = IdempotentMethod.of(specific, environment);
    if (read != null) {
      methods.putIfAbsent(specific, read);
    }
    return read;
  }

  @Override
  public Object invoke(MethodInvocation invocation) throws Throwable {
    Class<?> target = invocation.getThis() == null ? invocation.getMethod().getDeclaringClass()
        : AopUtils.getTargetClass(invocation.getThis());
    IdempotentMethod m = plan(invocation.getMethod(), target);
    if (m == null) {
      return invocation.proceed();
    }
    Object[] args = invocation.getArguments();
    try {
      return executor(m.window).execute(m.key(args), m.fingerprint(args, canonical()), codec(m), tx -> {
        try {
          return invocation.proceed();
        } catch (Throwable t) {
          throw new Thrown(t);
        }
      }).value(); // InFlight: InFlightException
    } catch (Thrown thrown) {
      throw thrown.getCause(); // the method's own exception, checked or not, as it was
    }
  }

  /** The method's failure carried through the executor, which rolled the key back for it. */
  private static final class Thrown extends RuntimeException {
    Thrown(Throwable cause) {
      super(cause.toString(), cause, false, false);
    }
  }

  /** The executors of every {@link Idempotent} method called so far, one per window. */
  java.util.Collection<IdempotentExecutor> executors() {
    return executors.values();
  }

  private IdempotentExecutor executor(Duration window) {
    return executors.computeIfAbsent(window,
        w -> idem.getObject().executor().name("executor:@Idempotent").window(DedupeWindow.of(w)).build());
  }

  private Codec<Object> codec(IdempotentMethod m) {
    return codecs.computeIfAbsent(m.method, method -> m.codec(mappers().application()));
  }

  private ObjectMapper canonical() {
    return mappers().canonical();
  }

  private Mappers mappers() {
    Mappers known = found;
    if (known == null) {
      ObjectMapper application = mappers.getIfAvailable();
      ObjectMapper base = application != null ? application.copy() : JsonMapper.builder().findAndAddModules().build();
      // Map entries in key order, and every object as a map first: the order of fields makes no difference.
      found = known = new Mappers(application, base.enable(SerializationFeature.ORDER_MAP_ENTRIES_BY_KEYS));
    }
    return known;
  }
}
