-- A stand-in for idem-jdbc's PostgreSQL migration, at the same location: idem-flyway's tests cannot
-- have idem-jdbc on their class path (idem-jdbc's tests use idem-testing, which uses this module),
-- so they show where IdemFlyway migrates and what it refuses, not what idem's tables are (that is
-- idem-jdbc's tests, through @IdemTest). Qualified by Flyway's defaultSchema, as the real one is.
CREATE TABLE ${flyway:defaultSchema}.idem_keys (scope text NOT NULL, key text NOT NULL, PRIMARY KEY (scope, key));
CREATE TABLE ${flyway:defaultSchema}.idem_stand_in (folder text NOT NULL);
INSERT INTO ${flyway:defaultSchema}.idem_stand_in VALUES ('postgresql');
