package admin

import (
	"encoding/json"
	"errors"
	"net/http"
)

// importExportOps export and import the price and routing rules (importexport_grpc.go).
var importExportOps = []operation{
	{role: RoleViewer, rest: "GET /admin/export", grpc: "Export", serve: func(s *Service, r *http.Request) (int, any, error) {
		out, err := s.Export(r.Context())
		return http.StatusOK, out, err
	}},
	{role: RoleAdmin, rest: "POST /admin/import", grpc: "Import", serve: func(s *Service, r *http.Request) (int, any, error) {
		in, err := decodeImport(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.Import(r.Context(), in)
		return http.StatusOK, out, err
	}},
}

// decodeImport decodes a bundle. The document must be well-formed JSON with only the two known
// keys (else 400); each element is then decoded on its own so that every bad element (wrong
// types, unknown fields) is reported by index together with the validation problems (422).
func decodeImport(r *http.Request) (ImportBundle, error) {
	body, err := readBody(r, MaxImportBytes)
	if err != nil {
		return ImportBundle{}, err
	}
	// Fast path: the whole document decodes strictly in one pass.
	var whole struct {
		PriceRules   []PriceRuleInput   `json:"price_rules"`
		RoutingRules []RoutingRuleInput `json:"routing_rules"`
	}
	if decodeStrict(body, &whole) == nil {
		return ImportBundle{PriceRules: whole.PriceRules, RoutingRules: whole.RoutingRules}, nil
	}
	// Slow path: find every bad element.
	var raw struct {
		PriceRules   []json.RawMessage `json:"price_rules"`
		RoutingRules []json.RawMessage `json:"routing_rules"`
	}
	if err := decodeStrict(body, &raw); err != nil {
		return ImportBundle{}, err
	}
	var b ImportBundle
	b.PriceRules = make([]PriceRuleInput, len(raw.PriceRules))
	for i, e := range raw.PriceRules {
		if err := decodeStrict(e, &b.PriceRules[i]); err != nil {
			b.Problems = append(b.Problems, elementProblems("price_rules", i, err)...)
		}
	}
	b.RoutingRules = make([]RoutingRuleInput, len(raw.RoutingRules))
	for i, e := range raw.RoutingRules {
		if err := decodeStrict(e, &b.RoutingRules[i]); err != nil {
			b.Problems = append(b.Problems, elementProblems("routing_rules", i, err)...)
		}
	}
	return b, nil
}

func elementProblems(section string, i int, err error) []Detail {
	var ae *Error
	if !errors.As(err, &ae) {
		return []Detail{{Section: section, Index: intp(i), Message: err.Error()}}
	}
	if len(ae.Details) == 0 {
		return []Detail{{Section: section, Index: intp(i), Message: ae.Message}}
	}
	out := make([]Detail, len(ae.Details))
	for j, d := range ae.Details {
		d.Section, d.Index = section, intp(i)
		out[j] = d
	}
	return out
}
