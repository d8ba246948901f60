-- 0020: the cost-disclosure switch (issue 29; docs/cost.md, "Turning it off").
--
-- gateway_settings.cost_disclosure is the gateway-wide switch (on by default); api_keys.cost_disclosure is a
-- key's own, NULL following the gateway's. Both ride the tables' existing triggers: the revision bump, the
-- changed_revision stamp (so a key's change reaches data planes in a delta) and the audit log.
--
-- The cost lookup by request id (SettlementService.GetRequestCost) needs no new index: it selects by
-- request_id and api_key_id, and usages_request_id_key (request_id, created_at) leads with request_id in
-- every partition, so the lookup is one index probe per monthly partition whatever the table's size.
ALTER TABLE gateway_settings ADD COLUMN cost_disclosure boolean NOT NULL DEFAULT true;
ALTER TABLE api_keys ADD COLUMN cost_disclosure boolean;
