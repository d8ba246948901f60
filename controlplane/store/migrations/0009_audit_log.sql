-- 0009_audit_log: the admin audit log (issue 16, docs/observability.md "Admin audit log"). Every row
-- written to a configuration table is recorded, in the writing transaction, by a row trigger: who (the
-- transaction's tollgate.actor, "<role>:<token name>", set by the admin API for REST, gRPC, the console,
-- import and catalog apply; else the database role), what (table and key), before and after (the row as
-- JSON, secrets redacted) and when. Rows are append-only. A configuration table added later needs its
-- trigger too: audit_row(key columns…, '!secret column'…, '-ignored column'…).

CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor       text        NOT NULL,
    actor_role  text        NOT NULL,
    actor_name  text        NOT NULL,
    action      text        NOT NULL CHECK (action IN ('insert', 'update', 'delete')),
    resource    text        NOT NULL,
    resource_id text        NOT NULL,
    before      jsonb,
    after       jsonb,
    txid        xid8        NOT NULL DEFAULT pg_current_xact_id()
);
CREATE INDEX audit_log_resource_idx ON audit_log (resource, resource_id, id);
CREATE INDEX audit_log_actor_idx ON audit_log (actor_name, id);
CREATE INDEX audit_log_at_idx ON audit_log (at);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only' USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE OR TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- audit_row records one row change. Its arguments name the table's key columns; an argument '!col'
-- names a secret column, recorded as "redacted" (and "redacted (changed)" in the after image when an
-- update changed it); '-col' names a column whose changes alone are not worth a record (the row is
-- still recorded whole when something else changed).
CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
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
    IF TG_OP <> 'INSERT' THEN o := to_jsonb(OLD); END IF;
    IF TG_OP <> 'DELETE' THEN n := to_jsonb(NEW); END IF;
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

CREATE TRIGGER providers_audit AFTER INSERT OR UPDATE OR DELETE ON providers
    FOR EACH ROW EXECUTE FUNCTION audit_row('id', '-updated_at');
CREATE TRIGGER credentials_audit AFTER INSERT OR UPDATE OR DELETE ON credentials
    FOR EACH ROW EXECUTE FUNCTION audit_row('id', '!secret_ciphertext');
CREATE TRIGGER routes_audit AFTER INSERT OR UPDATE OR DELETE ON routes
    FOR EACH ROW EXECUTE FUNCTION audit_row('id', '-updated_at');
CREATE TRIGGER route_aliases_audit AFTER INSERT OR UPDATE OR DELETE ON route_aliases
    FOR EACH ROW EXECUTE FUNCTION audit_row('alias');
CREATE TRIGGER route_members_audit AFTER INSERT OR UPDATE OR DELETE ON route_members
    FOR EACH ROW EXECUTE FUNCTION audit_row('id');
CREATE TRIGGER price_rules_audit AFTER INSERT OR UPDATE OR DELETE ON price_rules
    FOR EACH ROW EXECUTE FUNCTION audit_row('id', '-updated_at');
CREATE TRIGGER routing_rules_audit AFTER INSERT OR UPDATE OR DELETE ON routing_rules
    FOR EACH ROW EXECUTE FUNCTION audit_row('id');
CREATE TRIGGER orgs_audit AFTER INSERT OR UPDATE OR DELETE ON orgs
    FOR EACH ROW EXECUTE FUNCTION audit_row('id');
CREATE TRIGGER teams_audit AFTER INSERT OR UPDATE OR DELETE ON teams
    FOR EACH ROW EXECUTE FUNCTION audit_row('id');
CREATE TRIGGER users_audit AFTER INSERT OR UPDATE OR DELETE ON users
    FOR EACH ROW EXECUTE FUNCTION audit_row('id');
CREATE TRIGGER api_keys_audit AFTER INSERT OR UPDATE OR DELETE ON api_keys
    FOR EACH ROW EXECUTE FUNCTION audit_row('id', '!key_hash', '!previous_key_hash');
CREATE TRIGGER admin_tokens_audit AFTER INSERT OR UPDATE OR DELETE ON admin_tokens
    FOR EACH ROW EXECUTE FUNCTION audit_row('id', '!token_hash');
-- Settlement raises cost_used on every batch: only limit changes, new and removed quotas are recorded
-- (the WHEN clause keeps the trigger off the settlement path); spend corrections are quota_adjustments.
CREATE TRIGGER quotas_audit_insert_delete AFTER INSERT OR DELETE ON quotas
    FOR EACH ROW EXECUTE FUNCTION audit_row('scope', 'scope_id');
CREATE TRIGGER quotas_audit_limit AFTER UPDATE OF cost_limit, period, time_zone, rpm_limit, tpm_limit ON quotas
    FOR EACH ROW WHEN ((OLD.cost_limit, OLD.period, OLD.time_zone, OLD.rpm_limit, OLD.tpm_limit)
                  IS DISTINCT FROM (NEW.cost_limit, NEW.period, NEW.time_zone, NEW.rpm_limit, NEW.tpm_limit))
    EXECUTE FUNCTION audit_row('scope', 'scope_id', '-cost_used', '-updated_at', '-adjust_epoch');
CREATE TRIGGER quota_adjustments_audit AFTER INSERT ON quota_adjustments
    FOR EACH ROW EXECUTE FUNCTION audit_row('id');
-- Configuration tables of migrations 0006-0008 (budgets, model policy, alerts, scheduled prices).
CREATE TRIGGER gateway_settings_audit AFTER INSERT OR UPDATE OR DELETE ON gateway_settings
    FOR EACH ROW EXECUTE FUNCTION audit_row('singleton', '-updated_at');
CREATE TRIGGER quota_alerts_audit AFTER INSERT OR UPDATE OR DELETE ON quota_alerts
    FOR EACH ROW EXECUTE FUNCTION audit_row('scope', 'scope_id', '-updated_at');
CREATE TRIGGER webhook_endpoints_audit AFTER INSERT OR UPDATE OR DELETE ON webhook_endpoints
    FOR EACH ROW EXECUTE FUNCTION audit_row('id', '!secret_ciphertext');
CREATE TRIGGER price_rule_schedule_audit AFTER INSERT OR UPDATE OR DELETE ON price_rule_schedule
    FOR EACH ROW EXECUTE FUNCTION audit_row('id');
