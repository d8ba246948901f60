-- Issue 19, item 3: every usage row records the rule id and the version it was priced with. The data
-- plane prices with the snapshot's rules, each carrying its current price_rule_versions.version, and sends
-- that version in the settlement record. NULL: no rule matched, or a row settled before this column (or by
-- a data plane that does not send the version yet). No foreign key: history rows are the record, usages
-- must never fail to settle because of it.
ALTER TABLE usages ADD COLUMN price_rule_version integer CHECK (price_rule_version IS NULL OR price_rule_version > 0);
