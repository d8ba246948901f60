package admin

import (
	"bytes"
	"fmt"
	"net/http"
)

// spendOps report spend (spend_grpc.go): GET /admin/spend answers JSON by default, CSV with format=csv.
var spendOps = []operation{
	{role: RoleViewer, rest: "GET /admin/spend", grpc: "GetSpend", serve: func(s *Service, r *http.Request) (int, any, error) {
		req, format, err := parseSpendRequest(r)
		if err != nil {
			return 0, nil, err
		}
		res, err := s.Spend(r.Context(), req)
		if err != nil {
			return 0, nil, err
		}
		if format != "csv" {
			return http.StatusOK, res, nil
		}
		var buf bytes.Buffer
		if err := writeSpendCSV(&buf, res); err != nil {
			return 0, nil, fmt.Errorf("spend csv: %w", err)
		}
		name := fmt.Sprintf("tollgate-spend-%s-%s.csv", res.Since.UTC().Format("20060102T15Z"), res.Until.UTC().Format("20060102T15Z"))
		return http.StatusOK, rawBody{data: buf.Bytes(), header: http.Header{
			"Content-Type":           {"text/csv; charset=utf-8"},
			"Content-Disposition":    {`attachment; filename="` + name + `"`},
			"Cache-Control":          {"no-store"},
			"X-Content-Type-Options": {"nosniff"},
		}}, nil
	}},
}
