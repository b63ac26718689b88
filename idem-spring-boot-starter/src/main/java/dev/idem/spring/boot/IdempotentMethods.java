package dev.idem.spring.boot;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.idem.spring.boot.IdemHttpAutoConfiguration.SpringRequestTransaction;
import dev.idem.jdbc.Idem;
import dev.idem.jdbc.executor.IdempotentExecutor;
import dev.idem.key.IdempotencyKey;
import dev.idem.result.Codec;
import dev.idem.spring.Idempotent;
import dev.idem.window.DedupeWindow;
import java.lang.reflect.Method;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import org.aopalliance.aop.Advice;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.springframework.aop.Pointcut;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.AopUtils;
import org.springframework.aop.support.StaticMethodMatcherPointcut;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.BeanFactoryAnnotationUtils;
import org.springframework.core.MethodClassKey;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.env.Environment;
import org.springframework.stereotype.Controller;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;
import org.springframework.util.StringUtils;

/**
 * Runs every {@link Idempotent} method of a Spring bean (not a controller's: the HTTP filter guards
 * handlers) through an idem executor: the key from the annotation, the other arguments as the
 * fingerprint, the return value stored as JSON. A repeat returns the stored value without running
 * the method; another fingerprint under the key throws {@code KeyReuseException}; a copy still in
 * flight after the executor's wait throws {@code InFlightException}; the method's own exception
 * (checked or not) is thrown as it was, and the key rolls back with its writes.
 *
 * <p>The key always joins a Spring transaction: the caller's if one is open, else one this advice
 * begins through the application's transaction manager, with the method's own {@code
 * @Transactional} attributes if it has them (else REQUIRED), so the order of this advice and
 * Spring's transaction advice makes no difference, and JPA works. Without a transaction manager,
 * idem's own transaction, lent to Spring.
 *
 * <p>Each method is read and checked when its bean is proxied (so a bad annotation stops start-up);
 * the {@code Idem} bean, the mapper, the transaction manager and the executors are looked up at the
 * first call, so this advisor, made early by the auto-proxy creator, pulls nothing else early.
 */
final class IdempotentMethods extends AbstractPointcutAdvisor implements MethodInterceptor, BeanFactoryAware {
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
  private BeanFactory beans;
  /** A method as called on a bean class: a generic base class's method returns the subclass's type. */
  private record On(Method method, Class<?> target) {}
  private final Map<On, IdempotentMethod> methods = new ConcurrentHashMap<>();
  /** What a call needs, by the method as invoked and the bean class: found on the first call only. */
  private final Map<MethodClassKey, Called> called = new ConcurrentHashMap<>();
  private final Map<DedupeWindow, IdempotentExecutor> executors = new ConcurrentHashMap<>();

  /** What a method's calls need, found at its first call: its codec and its transaction (null: none). */
  private record Ready(Codec<Object> codec, SpringRequestTransaction transaction) {}

  /** A method as invoked on a bean class: its plan (null: not idempotent) and, once called, its {@link Ready}. */
  private static final class Called {
    final IdempotentMethod method;
    private volatile Ready ready;

    Called(IdempotentMethod method) {
      this.method = method;
    }
  }

  IdempotentMethods(ObjectProvider<Idem> idem, ObjectProvider<ObjectMapper> mappers, Environment environment) {
    this.idem = idem;
    this.mappers = mappers;
    this.environment = environment;
    // Inside @Transactional's advice when both apply; either way one transaction (see invoke).
    setOrder(LOWEST_PRECEDENCE);
  }

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    this.beans = beanFactory;
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
    Method specific = AopUtils.getMostSpecificMethod(method, targetClass); // resolves bridge methods too
    On on = new On(specific, targetClass);
    IdempotentMethod known = methods.get(on);
    if (known != null) {
      return known;
    }
    IdempotentMethod read = IdempotentMethod.of(specific, targetClass, environment);
    if (read != null) {
      methods.putIfAbsent(on, read);
    }
    return read;
  }

  @Override
  public Object invoke(MethodInvocation invocation) throws Throwable {
    Class<?> target = invocation.getThis() == null ? invocation.getMethod().getDeclaringClass()
        : AopUtils.getTargetClass(invocation.getThis());
    Called c = called.computeIfAbsent(new MethodClassKey(invocation.getMethod(), target),
        k -> new Called(plan(invocation.getMethod(), target)));
    IdempotentMethod m = c.method;
    if (m == null) {
      return invocation.proceed();
    }
    Ready r = ready(c);
    Object[] args = invocation.getArguments();
    // Checked before any transaction begins: a bad key is the caller's mistake, nothing to roll back.
    IdempotencyKey key = m.key(args);
    dev.idem.key.Fingerprint fingerprint = m.fingerprint(args);
    Callable<Object> call = () -> executor(m.window).execute(key, fingerprint, r.codec(), tx -> {
      try {
        return invocation.proceed();
      } catch (Throwable t) {
        throw new Thrown(t);
      }
    }).value(); // InFlight: InFlightException
    try {
      if (r.transaction() != null && !TransactionSynchronizationManager.isActualTransactionActive()) {
        // Begun here, whatever the order of the advisors: idem joins it, and so does the method's
        // own @Transactional advice if it runs inside this one.
        return r.transaction().run(call);
      }
      return call.call();
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

  private IdempotentExecutor executor(DedupeWindow window) {
    return executors.computeIfAbsent(window,
        w -> idem.getObject().executor().name("executor:@Idempotent").window(w).build());
  }

  private Ready ready(Called c) {
    Ready r = c.ready;
    if (r == null) {
      synchronized (c) { // once per method: the beans are looked up at its first call
        r = c.ready;
        if (r == null) {
          IdempotentMethod m = c.method;
          PlatformTransactionManager manager = transactionManager(m);
          r = new Ready(m.codec(mappers.getIfAvailable()),
              manager == null ? null : new SpringRequestTransaction(new TransactionTemplate(manager, m.transaction)));
          c.ready = r;
        }
      }
    }
    return r;
  }

  /** The method's {@code @Transactional} transaction manager if it names one, else the application's; null if none. */
  private PlatformTransactionManager transactionManager(IdempotentMethod m) {
    if (beans == null) {
      return null;
    }
    String qualifier = m.transaction.getQualifier();
    if (StringUtils.hasText(qualifier)) {
      return BeanFactoryAnnotationUtils.qualifiedBeanOfType(beans, PlatformTransactionManager.class, qualifier);
    }
    return beans.getBeanProvider(PlatformTransactionManager.class).getIfAvailable();
  }
}
