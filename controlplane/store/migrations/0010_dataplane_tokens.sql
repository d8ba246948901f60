-- Issue 17, item 3: per-data-plane credentials with separate rights. A data plane presents its token as
-- "authorization: Bearer <token>" on SnapshotService.Watch (scope snapshot:read: every upstream secret) and
-- SettlementService.Settle (scope settlement:write: billing). Only the sha256 of the token is stored.
-- Revoking sets revoked_at (the row stays for the audit trail); the trigger tells every control-plane
-- replica at once, and each closes the open Watch streams of that token (controlplane/dptoken).
CREATE TABLE dataplane_tokens (
    id         bigserial   PRIMARY KEY,
    name       text        NOT NULL CHECK (name <> '' AND length(name) <= 200),
    scopes     text[]      NOT NULL CHECK (cardinality(scopes) > 0
                                           AND scopes <@ ARRAY['snapshot:read', 'settlement:write']::text[]),
    token_hash bytea       NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);

CREATE FUNCTION dataplane_token_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.revoked_at IS NOT NULL AND OLD.revoked_at IS NULL THEN
        PERFORM pg_notify('tollgate_dataplane_tokens', NEW.id::text);
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER dataplane_token_revoked AFTER UPDATE OF revoked_at ON dataplane_tokens
    FOR EACH ROW EXECUTE FUNCTION dataplane_token_revoked();

-- Creating and revoking a data-plane token is an admin mutation: audited (docs/observability.md).
CREATE TRIGGER dataplane_tokens_audit AFTER INSERT OR UPDATE OR DELETE ON dataplane_tokens
    FOR EACH ROW EXECUTE FUNCTION audit_row('id', '!token_hash');
