package dev.idem.jdbc.notify;

import dev.idem.internal.base.Require;
import java.time.Duration;
import java.time.Instant;

/** The implementations of {@link SendResult}'s cases: values, built by idem only. */
final class SendResultValue {
  private SendResultValue() {}

  record SentValue(String collapseId, boolean takeover) implements SendResult.Sent {
    SentValue {
      Require.notNull(collapseId, "collapseId");
    }
  }

  record DuplicateValue(Instant firstAt) implements SendResult.Duplicate {
    DuplicateValue {
      Require.notNull(firstAt, "firstAt");
    }
  }

  record InFlightValue(Duration retryAfter) implements SendResult.InFlight {
    InFlightValue {
      Require.notNull(retryAfter, "retryAfter");
    }
  }

  record CappedValue(String recipient, Cap cap) implements SendResult.Capped {
    CappedValue {
      Require.notNull(recipient, "recipient");
      Require.notNull(cap, "cap");
    }
  }
}
