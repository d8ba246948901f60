-- 0001_init: the Tollgate schema (DESIGN §3). Money is numeric; enumerations are checks.

CREATE TABLE config_revision (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    revision   bigint  NOT NULL,
    bumped_xid xid8
);
INSERT INTO config_revision (singleton, revision) VALUES (true, 1);

-- bump_config_revision increments the revision at most once per transaction and notifies listeners
-- on channel tollgate_config with the new revision. Statement-level triggers call it after every
-- configuration write, so no code path can forget it.
CREATE FUNCTION bump_config_revision() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rev bigint;
BEGIN
    UPDATE config_revision
       SET revision = revision + 1, bumped_xid = pg_current_xact_id()
     WHERE singleton AND bumped_xid IS DISTINCT FROM pg_current_xact_id()
    RETURNING revision INTO rev;
    IF rev IS NOT NULL THEN
        PERFORM pg_notify('tollgate_config', rev::text);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TABLE providers (
    id           bigserial PRIMARY KEY,
    name         text        NOT NULL UNIQUE CHECK (name <> ''),
    channel_type text        NOT NULL CHECK (channel_type IN ('alpha', 'beta', 'gamma', 'custom', 'router')),
    base_url     text        NOT NULL CHECK (base_url <> ''),
    enabled      boolean     NOT NULL DEFAULT true,
    settings     jsonb       NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(settings) = 'object'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE credentials (
    id                bigserial PRIMARY KEY,
    provider_id       bigint      NOT NULL REFERENCES providers (id) ON DELETE CASCADE,
    -- AES-GCM ciphertext (nonce || sealed) of the secret, keyed by TOLLGATE_SECRET_KEY.
    secret_ciphertext bytea       NOT NULL,
    weight            integer     NOT NULL DEFAULT 1 CHECK (weight > 0),
    enabled           boolean     NOT NULL DEFAULT true,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX credentials_provider_idx ON credentials (provider_id);

CREATE TABLE routes (
    id         bigserial PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (name <> ''),
    strategy   text        NOT NULL DEFAULT 'priority' CHECK (strategy IN ('priority', 'weighted')),
    enabled    boolean     NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE route_aliases (
    alias    text PRIMARY KEY CHECK (alias <> ''),
    route_id bigint NOT NULL REFERENCES routes (id) ON DELETE CASCADE
);
CREATE INDEX route_aliases_route_idx ON route_aliases (route_id);

CREATE TABLE route_members (
    id                bigserial PRIMARY KEY,
    route_id          bigint  NOT NULL REFERENCES routes (id) ON DELETE CASCADE,
    provider_id       bigint  NOT NULL REFERENCES providers (id) ON DELETE RESTRICT,
    upstream_model_id text    NOT NULL CHECK (upstream_model_id <> ''),
    priority          integer NOT NULL DEFAULT 0,
    weight            integer NOT NULL DEFAULT 1 CHECK (weight >= 0),
    enabled           boolean NOT NULL DEFAULT true,
    UNIQUE (route_id, provider_id, upstream_model_id)
);
CREATE INDEX route_members_provider_idx ON route_members (provider_id);

CREATE TABLE price_rules (
    id                       bigserial PRIMARY KEY,
    provider_id              bigint REFERENCES providers (id) ON DELETE RESTRICT,
    match_type               text    NOT NULL CHECK (match_type IN ('exact', 'contains')),
    model_match              text    NOT NULL CHECK (model_match <> ''),
    input_price              numeric NOT NULL CHECK (input_price >= 0),
    output_price             numeric NOT NULL CHECK (output_price >= 0),
    cache_read_price         numeric NOT NULL CHECK (cache_read_price >= 0),
    cache_creation_5m_price  numeric NOT NULL CHECK (cache_creation_5m_price >= 0),
    cache_creation_30m_price numeric NOT NULL CHECK (cache_creation_30m_price >= 0),
    cache_creation_1h_price  numeric NOT NULL CHECK (cache_creation_1h_price >= 0),
    image_output_price       numeric NOT NULL CHECK (image_output_price >= 0),
    enabled                  boolean NOT NULL DEFAULT true,
    pricing_tiers_json       jsonb   NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(pricing_tiers_json) = 'array'),
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX price_rules_provider_idx ON price_rules (provider_id);

CREATE TABLE routing_rules (
    id             bigserial PRIMARY KEY,
    provider_id    bigint  NOT NULL REFERENCES providers (id) ON DELETE CASCADE,
    operation      text    NOT NULL CHECK (operation IN ('list_models', 'get_model', 'count_tokens',
                       'generate_content', 'stream_generate_content', 'create_image', 'edit_image', 'rerank',
                       'create_embedding', 'compact_content', 'create_conversation')),
    kind           text    NOT NULL CHECK (kind IN ('alpha_responses', 'alpha_chat_completions', 'beta_messages',
                       'gamma_generate_content', 'alpha', 'beta', 'gamma')),
    implementation text    NOT NULL CHECK (implementation IN ('passthrough', 'transform_to', 'local', 'unsupported')),
    dest_operation text CHECK (dest_operation IN ('list_models', 'get_model', 'count_tokens',
                       'generate_content', 'stream_generate_content', 'create_image', 'edit_image', 'rerank',
                       'create_embedding', 'compact_content', 'create_conversation')),
    dest_kind      text CHECK (dest_kind IN ('alpha_responses', 'alpha_chat_completions', 'beta_messages',
                       'gamma_generate_content', 'alpha', 'beta', 'gamma')),
    sort_order     integer NOT NULL DEFAULT 0,
    enabled        boolean NOT NULL DEFAULT true,
    UNIQUE (provider_id, operation, kind),
    -- Generation operations use a generation kind; every other operation a provider-family kind.
    CONSTRAINT routing_rules_kind_fits CHECK (
        (operation IN ('generate_content', 'stream_generate_content'))
        = (kind IN ('alpha_responses', 'alpha_chat_completions', 'beta_messages', 'gamma_generate_content')))
);

CREATE TABLE orgs (
    id         bigserial PRIMARY KEY,
    name       text        NOT NULL UNIQUE CHECK (name <> ''),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE teams (
    id         bigserial PRIMARY KEY,
    org_id     bigint      NOT NULL REFERENCES orgs (id) ON DELETE RESTRICT,
    name       text        NOT NULL CHECK (name <> ''),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name),
    UNIQUE (id, org_id)
);

CREATE TABLE users (
    id         bigserial PRIMARY KEY,
    org_id     bigint      NOT NULL REFERENCES orgs (id) ON DELETE RESTRICT,
    team_id    bigint,
    name       text        NOT NULL CHECK (name <> ''),
    email      text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    -- A user's team belongs to the user's org.
    FOREIGN KEY (team_id, org_id) REFERENCES teams (id, org_id) ON DELETE RESTRICT
);

CREATE TABLE api_keys (
    id             bigserial PRIMARY KEY,
    user_id        bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name           text        NOT NULL DEFAULT '',
    key_hash       bytea       NOT NULL UNIQUE CHECK (length(key_hash) = 32),
    prefix         text        NOT NULL,
    allowed_models text[]      NOT NULL DEFAULT '{}',
    rpm_limit      integer     NOT NULL DEFAULT 0 CHECK (rpm_limit >= 0),
    tpm_limit      bigint      NOT NULL DEFAULT 0 CHECK (tpm_limit >= 0),
    enabled        boolean     NOT NULL DEFAULT true,
    expires_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE admin_tokens (
    id         bigserial PRIMARY KEY,
    name       text        NOT NULL DEFAULT '',
    role       text        NOT NULL CHECK (role IN ('admin', 'viewer')),
    token_hash bytea       NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE quotas (
    scope      text        NOT NULL CHECK (scope IN ('org', 'team', 'user')),
    scope_id   bigint      NOT NULL CHECK (scope_id > 0),
    cost_limit numeric CHECK (cost_limit >= 0),
    cost_used  numeric     NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, scope_id)
);

CREATE TABLE usages (
    id                        bigserial PRIMARY KEY,
    request_id                text        NOT NULL UNIQUE CHECK (request_id <> ''),
    api_key_id                bigint,
    user_id                   bigint,
    team_id                   bigint,
    org_id                    bigint,
    route_id                  bigint,
    provider_id               bigint,
    credential_id             bigint,
    logical_model             text        NOT NULL DEFAULT '',
    upstream_model            text        NOT NULL DEFAULT '',
    operation                 text        NOT NULL,
    inbound_kind              text        NOT NULL,
    implementation            text        NOT NULL DEFAULT '',
    dest_kind                 text        NOT NULL DEFAULT '',
    input_tokens              bigint      NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens             bigint      NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens         bigint      NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_creation_5m_tokens  bigint      NOT NULL DEFAULT 0 CHECK (cache_creation_5m_tokens >= 0),
    cache_creation_30m_tokens bigint      NOT NULL DEFAULT 0 CHECK (cache_creation_30m_tokens >= 0),
    cache_creation_1h_tokens  bigint      NOT NULL DEFAULT 0 CHECK (cache_creation_1h_tokens >= 0),
    image_output_tokens       bigint      NOT NULL DEFAULT 0 CHECK (image_output_tokens >= 0),
    requested_tier            text        NOT NULL DEFAULT '',
    reported_tier             text        NOT NULL DEFAULT '',
    price_rule_id             bigint,
    snapshot_version          bigint      NOT NULL DEFAULT 0,
    cost                      numeric     NOT NULL CHECK (cost >= 0),
    source                    text        NOT NULL CHECK (source IN ('upstream', 'local', 'estimated', 'none')),
    end_state                 text        NOT NULL CHECK (end_state IN ('completed', 'upstream_error',
                                  'upstream_interrupted', 'client_dropped', 'rejected')),
    http_status               integer     NOT NULL DEFAULT 0,
    latency_ms                bigint      NOT NULL DEFAULT 0,
    first_byte_ms             bigint      NOT NULL DEFAULT 0,
    created_at                timestamptz NOT NULL,
    settled_at                timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX usages_created_idx ON usages (created_at, id);
CREATE INDEX usages_org_idx ON usages (org_id, created_at);
CREATE INDEX usages_user_idx ON usages (user_id, created_at);
CREATE INDEX usages_key_idx ON usages (api_key_id, created_at);

-- Every configuration write bumps the revision. Quotas bump it only when the limit changes:
-- settlement updates cost_used continuously and must not trigger snapshot rebuilds.
CREATE TRIGGER providers_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON providers
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER credentials_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON credentials
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER routes_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON routes
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER route_aliases_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON route_aliases
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER route_members_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON route_members
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER price_rules_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON price_rules
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER routing_rules_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON routing_rules
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER orgs_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON orgs
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER teams_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON teams
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER users_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER api_keys_bump AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER quotas_bump_insert_delete AFTER INSERT OR DELETE OR TRUNCATE ON quotas
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
CREATE TRIGGER quotas_bump_limit AFTER UPDATE OF cost_limit ON quotas
    FOR EACH STATEMENT EXECUTE FUNCTION bump_config_revision();
