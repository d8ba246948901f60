package admin

import (
	"net/http"
	"strconv"
)

// scheduleOps are the scheduled price rule versions' operations (schedule_grpc.go).
var scheduleOps = []operation{
	{role: RoleViewer, rest: "GET /admin/price-rules/scheduled", grpc: "ListScheduledPriceRules", serve: func(s *Service, r *http.Request) (int, any, error) {
		var ruleID int64
		for k, v := range r.URL.Query() {
			if k != "price_rule_id" || len(v) != 1 {
				return 0, nil, errorf(CodeInvalid, "unknown or repeated query parameter %q", k)
			}
			id, err := strconv.ParseInt(v[0], 10, 64)
			if err != nil || id <= 0 {
				return 0, nil, errorf(CodeInvalid, "price_rule_id must be a positive integer, got %q", v[0])
			}
			ruleID = id
		}
		items, err := s.ListScheduledPriceRules(r.Context(), ruleID)
		return http.StatusOK, map[string]any{"items": items}, err
	}},
	{role: RoleAdmin, rest: "DELETE /admin/price-rules/scheduled/{id}", grpc: "CancelScheduledPriceRule", serve: deleteBy("id", (*Service).CancelScheduledPriceRule)},
}
