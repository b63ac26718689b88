-- Caps per recipient for notifications (Notifications with a Cap): one row per (cap, recipient),
-- holding the times of the sends within the cap's window, oldest first, at most its limit. A send
-- takes its place with one INSERT ... ON CONFLICT DO UPDATE ... WHERE (count in window) < limit,
-- which locks the row, so concurrent senders never exceed the limit. Times are the database clock.
CREATE TABLE ${flyway:defaultSchema}.idem_notification_caps (
  cap       text          NOT NULL,
  recipient text          NOT NULL,
  sent_at   timestamptz[] NOT NULL,
  PRIMARY KEY (cap, recipient)
);
