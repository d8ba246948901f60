-- 0016: reconciliation of the ledger against the providers' own reports (issue 30, docs/reconciliation.md).

-- A provider's admin access for its usage and cost reports, kept apart from its inference credentials: the
-- admin key is sealed with TOLLGATE_SECRET_KEY like a credential's secret, and no snapshot reads this table
-- (no config revision trigger either: it is control-plane-only configuration). kind says which report shape
-- the importer speaks; csv providers are reconciled from uploaded files and have no key.
CREATE TABLE reconcile_providers (
    provider_id          bigint      PRIMARY KEY REFERENCES providers (id) ON DELETE CASCADE,
    kind                 text        NOT NULL CHECK (kind IN ('openai', 'anthropic', 'csv')),
    base_url             text        NOT NULL DEFAULT '' CHECK (base_url = '' OR base_url ~ '^https?://'),
    admin_key_ciphertext bytea,
    enabled              boolean     NOT NULL DEFAULT true,
    -- Which instant of a request decides its provider day: its end (start + latency; what both report APIs
    -- meter) or its start.
    bucket_by            text        NOT NULL DEFAULT 'end' CHECK (bucket_by IN ('end', 'start')),
    -- How long after a day ends the provider may still add to it: a run within it is provisional, and
    -- ledger rows the provider has not reported are "pending_late" instead of "missing_at_provider".
    late_hours           integer     NOT NULL DEFAULT 24 CHECK (late_hours BETWEEN 0 AND 720),
    -- Drift thresholds (NULL: none). A drift over one raises one alert per run and threshold.
    tokens_abs           bigint      CHECK (tokens_abs >= 0),
    tokens_rel           numeric     CHECK (tokens_rel >= 0),
    cost_abs             numeric     CHECK (cost_abs >= 0),
    cost_rel             numeric     CHECK (cost_rel >= 0),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT reconcile_providers_key CHECK ((kind = 'csv') = (admin_key_ciphertext IS NULL)),
    CONSTRAINT reconcile_providers_url CHECK (kind = 'csv' OR base_url <> '')
);

-- The provider-side API key and project (workspace) each Tollgate credential is, so ledger rows group the
-- way the provider groups.
CREATE TABLE reconcile_credential_refs (
    credential_id bigint PRIMARY KEY REFERENCES credentials (id) ON DELETE CASCADE,
    key_ref       text   NOT NULL DEFAULT '',
    project_ref   text   NOT NULL DEFAULT ''
);

-- One imported report per provider and UTC day. A re-import replaces the day's rows (late data) in one
-- transaction and counts up import_count; complete says the day had ended when it was imported.
CREATE TABLE reconcile_imports (
    provider_id  bigint      NOT NULL REFERENCES providers (id) ON DELETE CASCADE,
    day          date        NOT NULL,
    source       text        NOT NULL CHECK (source IN ('api', 'file')),
    imported_at  timestamptz NOT NULL DEFAULT now(),
    complete     boolean     NOT NULL,
    import_count integer     NOT NULL DEFAULT 1,
    PRIMARY KEY (provider_id, day)
);

CREATE TABLE reconcile_report_usage (
    provider_id               bigint  NOT NULL,
    day                       date    NOT NULL,
    key_ref                   text    NOT NULL,
    project_ref               text    NOT NULL,
    model                     text    NOT NULL,
    tier                      text    NOT NULL,
    input_tokens              bigint  NOT NULL,
    output_tokens             bigint  NOT NULL,
    cache_read_tokens         bigint  NOT NULL,
    cache_creation_5m_tokens  bigint  NOT NULL,
    cache_creation_30m_tokens bigint  NOT NULL,
    cache_creation_1h_tokens  bigint  NOT NULL,
    image_output_tokens       bigint  NOT NULL,
    tokens_reported           boolean NOT NULL,
    requests                  bigint  NOT NULL,
    FOREIGN KEY (provider_id, day) REFERENCES reconcile_imports (provider_id, day) ON DELETE CASCADE
);
CREATE INDEX reconcile_report_usage_day_idx ON reconcile_report_usage (provider_id, day);

CREATE TABLE reconcile_report_costs (
    provider_id bigint  NOT NULL,
    day         date    NOT NULL,
    project_ref text    NOT NULL,
    model       text    NOT NULL,
    cost        numeric NOT NULL,
    FOREIGN KEY (provider_id, day) REFERENCES reconcile_imports (provider_id, day) ON DELETE CASCADE
);
CREATE INDEX reconcile_report_costs_day_idx ON reconcile_report_costs (provider_id, day);

-- One row per run: a provider and day compared, on a schedule or on demand. status: ok (no drift), drift,
-- failed (the import failed: error says why, nothing else is filled). Totals are over the lines.
CREATE TABLE reconcile_runs (
    id               bigserial   PRIMARY KEY,
    provider_id      bigint      NOT NULL REFERENCES providers (id) ON DELETE CASCADE,
    day              date        NOT NULL,
    trigger          text        NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    status           text        NOT NULL CHECK (status IN ('ok', 'drift', 'failed')),
    error            text        NOT NULL DEFAULT '',
    provisional      boolean     NOT NULL DEFAULT false,
    import_count     integer     NOT NULL DEFAULT 0,
    ledger_tokens    bigint      NOT NULL DEFAULT 0,
    provider_tokens  bigint      NOT NULL DEFAULT 0,
    ledger_cost      numeric     NOT NULL DEFAULT 0,
    provider_cost    numeric     NOT NULL DEFAULT 0,
    source_upstream  bigint      NOT NULL DEFAULT 0,
    source_local     bigint      NOT NULL DEFAULT 0,
    source_estimated bigint      NOT NULL DEFAULT 0,
    started_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX reconcile_runs_provider_day_idx ON reconcile_runs (provider_id, day, id);
CREATE INDEX reconcile_runs_day_idx ON reconcile_runs (day, id);

-- A run's lines. A tokens line is one provider usage group (key, project, model, tier): both sides' tokens
-- per category (provider_* NULL when the provider reports requests only) and requests, the ledger's cost and
-- source mix. A cost line is one cost group (project, model): both costs and the price rules (id, version,
-- rows) that priced the ledger's rows. cause says what the drift is (none when both sides agree).
CREATE TABLE reconcile_lines (
    id                          bigserial PRIMARY KEY,
    run_id                      bigint  NOT NULL REFERENCES reconcile_runs (id) ON DELETE CASCADE,
    kind                        text    NOT NULL CHECK (kind IN ('tokens', 'cost')),
    key_ref                     text    NOT NULL DEFAULT '',
    project_ref                 text    NOT NULL DEFAULT '',
    model                       text    NOT NULL,
    tier                        text    NOT NULL DEFAULT '',
    ledger_input                bigint  NOT NULL DEFAULT 0,
    ledger_output               bigint  NOT NULL DEFAULT 0,
    ledger_cache_read           bigint  NOT NULL DEFAULT 0,
    ledger_cache_creation_5m    bigint  NOT NULL DEFAULT 0,
    ledger_cache_creation_30m   bigint  NOT NULL DEFAULT 0,
    ledger_cache_creation_1h    bigint  NOT NULL DEFAULT 0,
    ledger_image_output         bigint  NOT NULL DEFAULT 0,
    provider_input              bigint,
    provider_output             bigint,
    provider_cache_read         bigint,
    provider_cache_creation_5m  bigint,
    provider_cache_creation_30m bigint,
    provider_cache_creation_1h  bigint,
    provider_image_output       bigint,
    ledger_requests             bigint  NOT NULL DEFAULT 0,
    provider_requests           bigint  NOT NULL DEFAULT 0,
    ledger_cost                 numeric NOT NULL DEFAULT 0,
    provider_cost               numeric NOT NULL DEFAULT 0,
    source_upstream             bigint  NOT NULL DEFAULT 0,
    source_local                bigint  NOT NULL DEFAULT 0,
    source_estimated            bigint  NOT NULL DEFAULT 0,
    price_rules                 jsonb   NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(price_rules) = 'array'),
    cause                       text    NOT NULL CHECK (cause IN ('none', 'missing_at_provider', 'pending_late',
                                    'missing_in_ledger', 'tokens', 'local_count', 'price', 'cost')),
    detail                      text    NOT NULL DEFAULT ''
);
CREATE INDEX reconcile_lines_run_idx ON reconcile_lines (run_id, id);

-- Admin changes to reconciliation settings are audited like every configuration table (0009); the admin key
-- is recorded as redacted.
CREATE TRIGGER reconcile_providers_audit AFTER INSERT OR UPDATE OR DELETE ON reconcile_providers
    FOR EACH ROW EXECUTE FUNCTION audit_row('provider_id', '!admin_key_ciphertext', '-updated_at');
CREATE TRIGGER reconcile_credential_refs_audit AFTER INSERT OR UPDATE OR DELETE ON reconcile_credential_refs
    FOR EACH ROW EXECUTE FUNCTION audit_row('credential_id');
