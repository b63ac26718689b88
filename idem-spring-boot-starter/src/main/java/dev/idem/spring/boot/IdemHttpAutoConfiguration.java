package dev.idem.spring.boot;

import dev.idem.http.IdempotencyKeyFilter;
import dev.idem.http.RequestFingerprint;
import dev.idem.http.RequestTransaction;
import dev.idem.jdbc.Idem;
import dev.idem.window.DedupeWindow;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.core.Ordered;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The {@code Idempotency-Key} filter in a servlet web application ({@code idem.http.*}): each guarded
 * request runs in a Spring transaction that idem's key joins, so the controller's writes (through
 * JdbcTemplate, jOOQ or JPA on the same DataSource) commit with the key and the stored response,
 * or none of them does. Mapped after every other filter (Spring Security's included), so the
 * principal that scopes keys is known and no filter after it is skipped when a run is repeated.
 */
@AutoConfiguration(after = IdemAutoConfiguration.class)
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
@ConditionalOnClass({IdempotencyKeyFilter.class, FilterRegistrationBean.class})
@ConditionalOnBean({Idem.class, PlatformTransactionManager.class})
@ConditionalOnProperty(prefix = "idem.http", name = "enabled", matchIfMissing = true)
public class IdemHttpAutoConfiguration {

  /** The filter, built from {@code idem.http.*} and the customizers. */
  @Bean
  @ConditionalOnMissingBean
  public IdempotencyKeyFilter idempotencyKeyFilter(Idem idem, IdemProperties properties,
      PlatformTransactionManager transactions, ObjectProvider<IdempotencyKeyFilterCustomizer> customizers) {
    IdemProperties.Http p = properties.getHttp();
    Set<String> methods = p.getMethods().stream().map(m -> m.toUpperCase(Locale.ROOT)).collect(Collectors.toUnmodifiableSet());
    RequestFingerprint fingerprint = p.getFingerprintFields().isEmpty()
        ? (p.getFingerprint() == IdemProperties.Http.Fingerprint.RAW_BODY ? RequestFingerprint.rawBody() : RequestFingerprint.canonicalJson())
        : RequestFingerprint.jsonFields(p.getFingerprintFields().toArray(String[]::new));
    IdempotencyKeyFilter.Builder b = IdempotencyKeyFilter.builder(idem)
        .guarded(request -> methods.contains(request.getMethod()))
        .headerName(p.getHeaderName())
        .acceptBareKeys(p.isAcceptBareKeys())
        .keyRequired(p.isKeyRequired())
        .fingerprint(fingerprint.withHeaders(p.getFingerprintHeaders().toArray(String[]::new)))
        .replayedHeaders(p.getReplayedHeaders().toArray(String[]::new))
        .transaction(new SpringRequestTransaction(new TransactionTemplate(transactions)));
    if (p.getWindow() != null) {
      b.window(DedupeWindow.of(p.getWindow()));
    }
    if (p.getInFlightWait() != null) {
      b.inFlightWait(p.getInFlightWait());
    }
    if (p.getRetryAfter() != null) {
      b.retryAfter(p.getRetryAfter());
    }
    if (p.getMaxBodySize() != null) {
      b.maxBodySize(Math.toIntExact(p.getMaxBodySize().toBytes()));
    }
    customizers.orderedStream().forEach(c -> c.customize(b));
    return b.build();
  }

  /** Maps the filter to {@code idem.http.url-patterns}, after every other filter. */
  @Bean
  @ConditionalOnMissingBean(name = "idempotencyKeyFilterRegistration")
  public FilterRegistrationBean<IdempotencyKeyFilter> idempotencyKeyFilterRegistration(IdempotencyKeyFilter filter,
      IdemProperties properties) {
    FilterRegistrationBean<IdempotencyKeyFilter> registration = new FilterRegistrationBean<>(filter);
    registration.setName("idempotencyKeyFilter");
    registration.setUrlPatterns(properties.getHttp().getUrlPatterns());
    registration.setOrder(Ordered.LOWEST_PRECEDENCE - 10);
    return registration;
  }

  /**
   * Runs a guarded request in Spring's transaction: committed when the work returns, rolled back
   * when it throws anything, and what it threw rethrown unchanged (the filter's contract).
   */
  static final class SpringRequestTransaction implements RequestTransaction {
    private final TransactionTemplate template;

    SpringRequestTransaction(TransactionTemplate template) {
      this.template = template;
    }

    @Override
    public <T> T run(Callable<T> work) throws Exception {
      try {
        return template.execute(status -> {
          try {
            return work.call();
          } catch (RuntimeException | Error e) {
            throw e;
          } catch (Exception e) {
            throw new Checked(e); // TransactionTemplate rolls back on unchecked exceptions only
          }
        });
      } catch (Checked c) {
        throw c.checked;
      }
    }

    private static final class Checked extends RuntimeException {
      private static final long serialVersionUID = 1L;
      private final transient Exception checked;

      Checked(Exception checked) {
        super(checked.toString(), checked, false, false);
        this.checked = checked;
      }
    }
  }
}
