-- Issue 15, items 2, 4 and 5: key rotation and direct addressing, the unpriced-model policy, and budget
-- alerts delivered as signed webhooks from a durable outbox.

-- Key rotation (docs/admin-api.md, "API keys"): a rotated key keeps its id (usage history, quotas) and
-- gets a new hash; the previous hash keeps working until previous_expires_at (the grace period), carried
-- in snapshots beside the new one and enforced by the data plane's clock.
ALTER TABLE api_keys
    ADD COLUMN previous_key_hash       bytea CHECK (previous_key_hash IS NULL OR length(previous_key_hash) = 32),
    ADD COLUMN previous_prefix         text,
    ADD COLUMN previous_expires_at     timestamptz,
    -- The key may use provider/model direct addressing even when the gateway turns it off.
    ADD COLUMN allow_direct_addressing boolean NOT NULL DEFAULT false,
    ADD COLUMN updated_at              timestamptz NOT NULL DEFAULT now(),
    ADD CONSTRAINT api_keys_previous_whole CHECK ((previous_key_hash IS NULL) = (previous_expires_at IS NULL));
CREATE UNIQUE INDEX api_keys_previous_hash_key ON api_keys (previous_key_hash) WHERE previous_key_hash IS NOT NULL;
CREATE INDEX api_keys_user_idx ON api_keys (user_id, id);
CREATE INDEX api_keys_prefix_idx ON api_keys (prefix text_pattern_ops);

-- A hash is never both one key's current and another's previous hash.
CREATE FUNCTION api_keys_hash_disjoint() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM api_keys k WHERE k.id <> NEW.id
                  AND (k.key_hash = NEW.previous_key_hash OR k.previous_key_hash = NEW.key_hash)) THEN
        RAISE EXCEPTION 'api key hash already in use' USING ERRCODE = 'unique_violation',
            CONSTRAINT = 'api_keys_key_hash_key';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER api_keys_hash_disjoint BEFORE INSERT OR UPDATE OF key_hash, previous_key_hash ON api_keys
    FOR EACH ROW EXECUTE FUNCTION api_keys_hash_disjoint();

-- Gateway-wide model policy (docs/pricing.md, "Unpriced models"): the default unpriced-model policy of
-- every provider without its own, and whether provider/model direct addressing is on for every key.
CREATE TABLE gateway_settings (
    singleton         boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    unpriced_policy   text    NOT NULL DEFAULT 'allow' CHECK (unpriced_policy IN ('allow', 'deny')),
    direct_addressing boolean NOT NULL DEFAULT true,
    updated_at        timestamptz NOT NULL DEFAULT now()
);
INSERT INTO gateway_settings (singleton) VALUES (true);
CREATE TRIGGER gateway_settings_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON gateway_settings
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();

-- NULL: the provider follows gateway_settings.unpriced_policy.
ALTER TABLE providers ADD COLUMN unpriced_policy text CHECK (unpriced_policy IN ('allow', 'deny'));

-- Budget alerts (docs/budgets.md, "Alerts"). Thresholds are percentages of a quota's limit.
CREATE TABLE quota_alerts (
    scope      text     NOT NULL,
    scope_id   bigint   NOT NULL CHECK (scope_id > 0),
    thresholds integer[] NOT NULL CHECK (cardinality(thresholds) BETWEEN 1 AND 16
                   AND 1 <= ALL (thresholds) AND 1000 >= ALL (thresholds)),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, scope_id)
);

-- Webhook endpoints receive every alert event. The signing secret ("whsec_" + base64) is sealed with
-- TOLLGATE_SECRET_KEY like credential secrets: it must be read back to sign.
CREATE TABLE webhook_endpoints (
    id                bigserial PRIMARY KEY,
    url               text        NOT NULL CHECK (url ~ '^https?://'),
    description       text        NOT NULL DEFAULT '',
    secret_ciphertext bytea       NOT NULL,
    enabled           boolean     NOT NULL DEFAULT true,
    created_at        timestamptz NOT NULL DEFAULT now()
);

-- One event per (quota, period, threshold): the unique key is what makes two evaluating replicas, or
-- one evaluating twice, insert it once.
CREATE TABLE alert_events (
    id           bigserial PRIMARY KEY,
    type         text        NOT NULL,
    scope        text        NOT NULL,
    scope_id     bigint      NOT NULL,
    period_start timestamptz NOT NULL,
    threshold    integer     NOT NULL,
    cost_limit   numeric     NOT NULL,
    cost_used    numeric     NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (scope, scope_id, period_start, threshold)
);
CREATE INDEX alert_events_scope_idx ON alert_events (scope, scope_id, id);

-- The outbox: one delivery per (event, endpoint), inserted in the event's transaction. payload is the
-- exact body signed and sent on every attempt; webhook_id is the Standard Webhooks message id, the same
-- on every attempt (receivers deduplicate by it). A sender leases due rows (FOR UPDATE SKIP LOCKED, then
-- leased_until), so two replicas never send the same attempt; a lease left by a crashed sender expires.
CREATE TABLE webhook_deliveries (
    id              bigserial PRIMARY KEY,
    event_id        bigint      NOT NULL REFERENCES alert_events (id) ON DELETE CASCADE,
    endpoint_id     bigint      NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    webhook_id      text        NOT NULL UNIQUE,
    payload         text        NOT NULL,
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    leased_until    timestamptz,
    delivered_at    timestamptz,
    failed_at       timestamptz,
    last_status     integer     NOT NULL DEFAULT 0,
    last_error      text        NOT NULL DEFAULT '',
    UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
    WHERE delivered_at IS NULL AND failed_at IS NULL;
