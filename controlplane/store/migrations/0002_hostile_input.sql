-- 0002_hostile_input: defences against writes and reports that the rest of the system cannot carry
-- (issue 13 items 4 and 5).

-- Route names and aliases share one namespace in the snapshot (a request names either). routes.name and
-- route_aliases.alias are each unique, but an alias equal to a route's name was accepted and then failed
-- every snapshot compilation. This trigger refuses it on every write path (admin API, import, SQL).
CREATE FUNCTION route_names_disjoint() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    clash text;
BEGIN
    SELECT a.alias INTO clash FROM route_aliases a JOIN routes r ON r.name = a.alias LIMIT 1;
    IF clash IS NOT NULL THEN
        RAISE EXCEPTION 'route name or alias % is used twice (a name of one route and an alias)', clash
            USING ERRCODE = 'check_violation', CONSTRAINT = 'route_names_disjoint';
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER routes_names_disjoint AFTER INSERT OR UPDATE OF name ON routes
    FOR EACH STATEMENT EXECUTE FUNCTION route_names_disjoint();
CREATE TRIGGER route_aliases_names_disjoint AFTER INSERT OR UPDATE ON route_aliases
    FOR EACH STATEMENT EXECUTE FUNCTION route_names_disjoint();

-- A usage whose reported usage or cost is beyond the plausibility bounds of one request is stored with
-- cost 0 and flagged, never charged (docs/settlement.md, "Bounds"). flag_detail says what was reported.
ALTER TABLE usages
    ADD COLUMN billing_flag text NOT NULL DEFAULT '' CHECK (billing_flag IN ('', 'usage_out_of_bounds')),
    ADD COLUMN flag_detail  text NOT NULL DEFAULT '';
CREATE INDEX usages_flagged_idx ON usages (created_at) WHERE billing_flag <> '';

-- Audited corrections of a scope's spend (docs/admin-api.md, "Quota adjustments"). amount > 0 debits
-- (adds to cost_used), amount < 0 credits. Rows are append-only: the audit trail cannot be edited.
CREATE TABLE quota_adjustments (
    id               bigserial PRIMARY KEY,
    scope            text        NOT NULL CHECK (scope IN ('org', 'team', 'user')),
    scope_id         bigint      NOT NULL CHECK (scope_id > 0),
    amount           numeric     NOT NULL CHECK (amount <> 0),
    cost_used_before numeric     NOT NULL,
    cost_used_after  numeric     NOT NULL CHECK (cost_used_after >= 0),
    reason           text        NOT NULL CHECK (reason <> ''),
    actor_name       text        NOT NULL,
    actor_role       text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX quota_adjustments_scope_idx ON quota_adjustments (scope, scope_id, created_at);

CREATE FUNCTION quota_adjustments_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'quota_adjustments is append-only' USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER quota_adjustments_append_only BEFORE UPDATE OR DELETE ON quota_adjustments
    FOR EACH ROW EXECUTE FUNCTION quota_adjustments_append_only();
