package dev.idem.spring.boot;

/**
 * A start-up refusal of the starter: what idem found wrong in the application's setup, and how to
 * fix it, kept apart so that {@link IdemSetupFailureAnalyzer} prints them as Spring Boot's
 * "Description" and "Action" instead of a stack trace. Its message is both, for logs and for code
 * that catches it as the {@link IllegalStateException} it is.
 */
final class IdemSetupException extends IllegalStateException {
  private static final long serialVersionUID = 1L;

  private final String description;
  private final String action;

  /**
   * @param description what is wrong, naming the setting, bean or method
   * @param action the ways to fix it, as sentences
   */
  IdemSetupException(String description, String action) {
    this(description, action, null);
  }

  IdemSetupException(String description, String action, Throwable cause) {
    super(sentence(description) + " " + action, cause);
    this.description = sentence(description);
    this.action = action;
  }

  private static String sentence(String text) {
    return text.endsWith(".") ? text : text + ".";
  }

  /** What is wrong, as a sentence. */
  String description() {
    return description;
  }

  /** How to fix it. */
  String action() {
    return action;
  }
}
