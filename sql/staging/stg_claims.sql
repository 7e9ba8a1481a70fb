-- Staging for `claims` (columns: sql/schema/claims.sql): the registry of the papers' claims.
CREATE OR REPLACE VIEW stg_claims AS
SELECT *
FROM claims;
