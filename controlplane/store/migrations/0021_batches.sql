-- 0021: provider batches (issue 31; docs/batches.md).
--
-- A data plane that submitted a batch at a provider registers it (SettlementService.RegisterBatch) with its
-- attribution, its reservation and its lines; the control plane's batch watcher polls it at the provider with
-- the credential that created it and settles every result line exactly once as a usages row.
--
-- Exactly-once per line: usages is partitioned by created_at (0013), so a unique constraint on a line's
-- identity cannot live there. batch_lines, keyed (batch_id, custom_id), is the line's one state: settling a line
-- moves it from 'pending' to its end state with an INSERT ... ON CONFLICT DO UPDATE ... WHERE state = 'pending'
-- in the same transaction as its usages row (store.SettleUsages). A re-read, a restarted watcher or a second
-- control-plane replica finds the line settled and inserts no row.

CREATE TABLE batches (
    id                bigserial   PRIMARY KEY,
    provider_id       bigint      NOT NULL REFERENCES providers (id),
    credential_id     bigint      NOT NULL REFERENCES credentials (id),
    provider_batch_id text        NOT NULL CHECK (provider_batch_id <> '' AND length(provider_batch_id) <= 512),
    dialect           text        NOT NULL CHECK (dialect IN ('alpha', 'beta', 'gamma')),
    -- alpha: the batch's endpoint (/v1/chat/completions, /v1/responses, /v1/embeddings); beta/gamma: ''.
    endpoint          text        NOT NULL DEFAULT '',
    api_key_id        bigint      NOT NULL,
    user_id           bigint,
    team_id           bigint,
    org_id            bigint,
    route_id          bigint,
    -- The model the batch names when its lines do not (gamma); lines carry their own.
    logical_model     text        NOT NULL DEFAULT '',
    upstream_model    text        NOT NULL DEFAULT '',
    -- Provider status as last seen, mapped to: validating, in_progress, finalizing, ended.
    status            text        NOT NULL DEFAULT 'validating'
                                  CHECK (status IN ('validating', 'in_progress', 'finalizing', 'ended')),
    -- How it ended (when status = 'ended'): completed, failed, expired, cancelled.
    outcome           text        NOT NULL DEFAULT '' CHECK (outcome IN ('', 'completed', 'failed', 'expired', 'cancelled')),
    provider_status   text        NOT NULL DEFAULT '',
    created_at        timestamptz NOT NULL DEFAULT now(),
    -- The provider's own expiry of the batch (alpha's completion window, beta 24 h, gamma 48 h).
    expires_at        timestamptz NOT NULL,
    -- When the reservation expires on its own if never released: expires_at plus a grace (docs/batches.md).
    hold_expires_at   timestamptz NOT NULL,
    ended_at          timestamptz,
    -- Every result line has been read and settled (or closed as missing): the batch is done.
    settled_at        timestamptz,
    -- The reservation the data plane made at submission, integer micro-dollars, and its periods' admission time.
    reserved_micros   bigint      NOT NULL CHECK (reserved_micros >= 0),
    admitted_at       timestamptz,
    -- What is still held: reserved_micros less the estimates of the lines ended so far (0 once settled).
    held_micros       bigint      NOT NULL CHECK (held_micros >= 0),
    settled_cost      numeric     NOT NULL DEFAULT 0,
    line_count        integer     NOT NULL CHECK (line_count >= 0),
    lines_succeeded   integer     NOT NULL DEFAULT 0,
    lines_errored     integer     NOT NULL DEFAULT 0,
    lines_expired     integer     NOT NULL DEFAULT 0,
    lines_cancelled   integer     NOT NULL DEFAULT 0,
    -- Bumped by every change a data plane must apply to its hold (a line ended, the batch ended).
    progress_seq      bigint      NOT NULL DEFAULT 0,
    -- The watcher's lease: one control-plane replica works a batch at a time.
    leased_by         text        NOT NULL DEFAULT '',
    leased_until      timestamptz,
    next_poll_at      timestamptz NOT NULL DEFAULT now(),
    poll_count        integer     NOT NULL DEFAULT 0,
    last_error        text        NOT NULL DEFAULT '',
    UNIQUE (provider_id, provider_batch_id)
);
-- The watcher's claim: open batches due for a poll.
CREATE INDEX batches_open_idx ON batches (next_poll_at) WHERE settled_at IS NULL;
-- Data planes follow holds by progress_seq.
CREATE INDEX batches_progress_idx ON batches (progress_seq);
-- progress_seq values come from one counter row, updated last in every transaction that changes a hold and held
-- locked to its commit: values commit in increasing order, so a data plane that has read value n has seen every
-- change numbered below n. (A sequence would let a lower value commit after a higher one was read, and a reader
-- following after_seq would miss that change for good.)
CREATE TABLE batch_progress (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq bigint  NOT NULL
);
INSERT INTO batch_progress (seq) VALUES (0);

CREATE TABLE batch_lines (
    batch_id        bigint      NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
    custom_id       text        NOT NULL CHECK (custom_id <> '' AND length(custom_id) <= 512),
    logical_model   text        NOT NULL DEFAULT '',
    upstream_model  text        NOT NULL DEFAULT '',
    estimate_micros bigint      NOT NULL DEFAULT 0 CHECK (estimate_micros >= 0),
    -- pending until its result is settled; then the provider's end state of the line. 'missing': the batch
    -- ended and its results did not name the line. A line the results name but the data plane did not register is stored with registered = false.
    state           text        NOT NULL DEFAULT 'pending'
                                CHECK (state IN ('pending', 'succeeded', 'errored', 'expired', 'cancelled', 'missing')),
    registered      boolean     NOT NULL DEFAULT true,
    cost            numeric,
    usage_request_id text,
    settled_at      timestamptz,
    PRIMARY KEY (batch_id, custom_id)
);

-- Usage rows of batch lines name their batch and line (NULL for requests). Nullable columns without default:
-- adding them rewrites nothing.
ALTER TABLE usages ADD COLUMN batch_id bigint;
ALTER TABLE usages ADD COLUMN custom_id text;
CREATE INDEX usages_batch_idx ON usages (batch_id, id) WHERE batch_id IS NOT NULL;
