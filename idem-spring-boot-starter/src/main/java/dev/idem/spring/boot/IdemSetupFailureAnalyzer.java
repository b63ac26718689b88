package dev.idem.spring.boot;

import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/**
 * Prints an {@link IdemSetupException} anywhere in a failed start-up's cause chain as Spring Boot's
 * "APPLICATION FAILED TO START" block: what idem found, then the ways to fix it. Registered in
 * {@code META-INF/spring.factories}; Boot makes it through its declared constructor, so it stays
 * package-private.
 */
final class IdemSetupFailureAnalyzer extends AbstractFailureAnalyzer<IdemSetupException> {

  @Override
  protected FailureAnalysis analyze(Throwable rootFailure, IdemSetupException cause) {
    return new FailureAnalysis(cause.description(), cause.action(), cause);
  }
}
