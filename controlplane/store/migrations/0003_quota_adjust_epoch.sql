-- Adjustment epoch of a quota (docs/settlement.md, "Adjustment epochs"): raised by every audited
-- adjustment in the transaction that changes cost_used, carried in snapshots and Settle answers, so the
-- data planes' cost_used mirror follows a credit (a lowered cost_used) at once.
ALTER TABLE quotas ADD COLUMN adjust_epoch bigint NOT NULL DEFAULT 0 CHECK (adjust_epoch >= 0);
