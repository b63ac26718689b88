-- A stand-in for idem-jdbc's MariaDB migration (see ../postgresql/V1__idem.sql for why). Its tables
-- are unqualified: Flyway runs it in its defaultSchema (USE), the database IdemFlyway chose.
CREATE TABLE idem_keys (scope varchar(255) NOT NULL, k varchar(255) NOT NULL, PRIMARY KEY (scope, k));
CREATE TABLE idem_stand_in (folder varchar(20) NOT NULL);
INSERT INTO idem_stand_in VALUES ('mariadb');
