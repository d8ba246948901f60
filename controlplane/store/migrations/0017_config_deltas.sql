-- Issue 32: configuration deltas (docs/snapshots.md, "Deltas").
--
-- A delta (B → V) is read from the database: every API key row written in (B, V] carries that revision in
-- changed_revision, every deleted key row leaves (kind, key, revision) in config_deletions. For that the
-- revision of a transaction must be known when its first row is written, so the bump moves from "after
-- the statement" to "at the first row written" (config_tx_revision), still once per transaction. The
-- transaction then holds the config_revision row lock until it commits, so config writers commit in
-- revision order and a reader whose snapshot shows revision R sees every row stamped <= R.

-- config_tx_revision returns the revision of the current transaction, bumping config_revision (and
-- notifying tollgate_config) the first time it is called in the transaction. The revision is cached in
-- a transaction-local setting keyed by the transaction id; a savepoint rolled back after the bump rolls
-- back both the bump and the setting, so the cache never names a bump that did not happen.
CREATE FUNCTION config_tx_revision() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    xid  text := pg_current_xact_id()::text;
    seen text := current_setting('tollgate.config_tx', true);
    rev  bigint;
BEGIN
    IF seen IS NOT NULL AND seen <> '' AND split_part(seen, ':', 1) = xid THEN
        RETURN split_part(seen, ':', 2)::bigint;
    END IF;
    UPDATE config_revision
       SET revision = revision + 1, bumped_xid = pg_current_xact_id()
     WHERE singleton AND bumped_xid IS DISTINCT FROM pg_current_xact_id()
    RETURNING revision INTO rev;
    IF rev IS NULL THEN
        SELECT revision INTO rev FROM config_revision WHERE singleton;
    ELSE
        PERFORM pg_notify('tollgate_config', rev::text);
    END IF;
    PERFORM set_config('tollgate.config_tx', xid || ':' || rev::text, true);
    RETURN rev;
END;
$$;

-- config_table_revisions: per configuration table, the revision of the last statement that wrote to it
-- (insert, update, delete or truncate; for quotas, as for their bump, only limit changes). A delta re-reads
-- a small kind only when a table it is built from was written since its base (a key creation reads no
-- small kind), and a revision that moved with no table written (a write around the triggers, the
-- revision raised by hand) makes the control plane read whole.
CREATE TABLE config_table_revisions (
    table_name text   PRIMARY KEY,
    revision   bigint NOT NULL
);

-- The statement-level bump of every configuration table (0001 and later) goes through config_tx_revision
-- and notes the table.
CREATE OR REPLACE FUNCTION bump_config_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO config_table_revisions (table_name, revision) VALUES (TG_TABLE_NAME, config_tx_revision())
    ON CONFLICT (table_name) DO UPDATE SET revision = EXCLUDED.revision;
    RETURN NULL;
END;
$$;

-- stamp_changed_revision stamps the row being written with its transaction's revision.
CREATE FUNCTION stamp_changed_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed_revision := config_tx_revision();
    RETURN NEW;
END;
$$;

-- Deltas from a revision below deltas_from.revision cannot be read (deletions pruned, a table truncated,
-- rows written before this migration carry 0): the control plane sends a full snapshot instead.
CREATE TABLE config_delta_horizon (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    revision  bigint  NOT NULL
);
INSERT INTO config_delta_horizon (singleton, revision) SELECT true, revision FROM config_revision;

-- config_deletions records deleted rows of the kinds a delta reads by change (API keys; the small kinds
-- are re-read whole and compared). Pruned after a retention (store.PruneConfigDeletions), which raises
-- the horizon.
CREATE TABLE config_deletions (
    kind       text        NOT NULL,
    key        bigint      NOT NULL,
    revision   bigint      NOT NULL,
    deleted_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX config_deletions_revision ON config_deletions (kind, revision);
CREATE INDEX config_deletions_deleted_at ON config_deletions (deleted_at);

CREATE FUNCTION record_config_deletion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO config_deletions (kind, key, revision) VALUES (TG_ARGV[0], OLD.id, config_tx_revision());
    RETURN NULL;
END;
$$;

-- A truncate leaves no per-row trace: no delta can span it.
CREATE FUNCTION config_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE config_delta_horizon SET revision = config_tx_revision() WHERE singleton;
    RETURN NULL;
END;
$$;

ALTER TABLE providers           ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE credentials         ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE routes              ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE route_aliases       ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE route_members       ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE price_rules         ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE price_rule_schedule ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE routing_rules       ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE orgs                ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE teams               ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE users               ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE api_keys            ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE quotas              ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;
ALTER TABLE gateway_settings    ADD COLUMN changed_revision bigint NOT NULL DEFAULT 0;

-- Only API keys are read by change at scale.
CREATE INDEX api_keys_changed_revision ON api_keys (changed_revision);

CREATE TRIGGER providers_stamp BEFORE INSERT OR UPDATE ON providers
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER credentials_stamp BEFORE INSERT OR UPDATE ON credentials
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER routes_stamp BEFORE INSERT OR UPDATE ON routes
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER route_aliases_stamp BEFORE INSERT OR UPDATE ON route_aliases
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER route_members_stamp BEFORE INSERT OR UPDATE ON route_members
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER price_rules_stamp BEFORE INSERT OR UPDATE ON price_rules
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER price_rule_schedule_stamp BEFORE INSERT OR UPDATE ON price_rule_schedule
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER routing_rules_stamp BEFORE INSERT OR UPDATE ON routing_rules
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER orgs_stamp BEFORE INSERT OR UPDATE ON orgs
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER teams_stamp BEFORE INSERT OR UPDATE ON teams
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER users_stamp BEFORE INSERT OR UPDATE ON users
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER api_keys_stamp BEFORE INSERT OR UPDATE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER gateway_settings_stamp BEFORE INSERT OR UPDATE ON gateway_settings
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
-- Settlement moves cost_used continuously and must not bump the revision: a quota row is stamped only
-- when a field the snapshot carries as configuration changes (as quotas_bump_limit, 0006).
CREATE TRIGGER quotas_stamp_insert BEFORE INSERT ON quotas
    FOR EACH ROW EXECUTE FUNCTION stamp_changed_revision();
CREATE TRIGGER quotas_stamp_limit BEFORE UPDATE OF cost_limit, period, time_zone, rpm_limit, tpm_limit ON quotas
    FOR EACH ROW WHEN (OLD.cost_limit IS DISTINCT FROM NEW.cost_limit OR OLD.period IS DISTINCT FROM NEW.period
                       OR OLD.time_zone IS DISTINCT FROM NEW.time_zone OR OLD.rpm_limit IS DISTINCT FROM NEW.rpm_limit
                       OR OLD.tpm_limit IS DISTINCT FROM NEW.tpm_limit)
    EXECUTE FUNCTION stamp_changed_revision();

CREATE TRIGGER api_keys_record_deletion AFTER DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION record_config_deletion('api_key');
CREATE TRIGGER api_keys_truncated AFTER TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION config_truncated();
CREATE TRIGGER users_truncated AFTER TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION config_truncated();

-- A key carries its user's org and team: moving a user changes every one of its keys' elements, so the
-- move stamps them (write cost proportional to the user's keys).
CREATE FUNCTION users_stamp_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE api_keys SET changed_revision = config_tx_revision() WHERE user_id = NEW.id;
    RETURN NULL;
END;
$$;
CREATE TRIGGER users_stamp_keys AFTER UPDATE OF org_id, team_id ON users
    FOR EACH ROW WHEN (OLD.org_id IS DISTINCT FROM NEW.org_id OR OLD.team_id IS DISTINCT FROM NEW.team_id)
    EXECUTE FUNCTION users_stamp_keys();

-- changed_revision is bookkeeping, not configuration: the audit log neither records it nor counts a
-- change of it alone (a user move re-stamps that user's keys).
CREATE OR REPLACE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    actor  text := coalesce(nullif(current_setting('tollgate.actor', true), ''), 'db:' || current_user);
    o      jsonb;
    n      jsonb;
    keyv   text := '';
    arg    text;
    col    text;
    ignore text[] := '{}';
    role   text;
    name   text;
BEGIN
    IF TG_OP <> 'INSERT' THEN o := to_jsonb(OLD) - 'changed_revision'; END IF;
    IF TG_OP <> 'DELETE' THEN n := to_jsonb(NEW) - 'changed_revision'; END IF;
    FOREACH arg IN ARRAY TG_ARGV LOOP
        col := substr(arg, 2);
        IF left(arg, 1) = '!' THEN
            IF n IS NOT NULL AND o IS NOT NULL AND (n -> col) IS DISTINCT FROM (o -> col) THEN
                n := jsonb_set(n, ARRAY[col], '"redacted (changed)"');
            ELSIF n IS NOT NULL AND n ? col THEN
                n := jsonb_set(n, ARRAY[col], '"redacted"');
            END IF;
            IF o IS NOT NULL AND o ? col THEN
                o := jsonb_set(o, ARRAY[col], '"redacted"');
            END IF;
        ELSIF left(arg, 1) = '-' THEN
            ignore := ignore || col;
        ELSE
            keyv := keyv || CASE WHEN keyv = '' THEN '' ELSE '/' END || coalesce(coalesce(n, o) ->> arg, '');
        END IF;
    END LOOP;
    IF TG_OP = 'UPDATE' AND (o - ignore) = (n - ignore) THEN
        RETURN NULL; -- nothing an operator changed (e.g. an import re-writing the same values)
    END IF;
    IF actor ~ '^(admin|viewer):' THEN
        role := split_part(actor, ':', 1);
        -- "admin:alice (catalog plan p1)" is alice's: the note stays in actor.
        name := regexp_replace(substr(actor, length(role) + 2), ' \(catalog plan [^)]*\)$', '');
    ELSE
        role := '';
        name := actor;
    END IF;
    INSERT INTO audit_log (actor, actor_role, actor_name, action, resource, resource_id, before, after)
    VALUES (actor, role, name, lower(TG_OP), TG_TABLE_NAME, keyv, o, n);
    RETURN NULL;
END;
$$;
