package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/tollgate/tollgate/controlplane/store"
)

// Request body limits: every admin body is capped; import bundles get more room.
const (
	MaxBodyBytes   = 1 << 20
	MaxImportBytes = 64 << 20
)

// httpStatus maps an error code to its HTTP status (DESIGN §8–9).
var httpStatus = map[Code]int{
	CodeInvalid:          http.StatusBadRequest,
	CodeUnauthenticated:  http.StatusUnauthorized,
	CodePermissionDenied: http.StatusForbidden,
	CodeNotFound:         http.StatusNotFound,
	CodeConflict:         http.StatusConflict,
	CodeInUse:            http.StatusConflict,
	CodeTooLarge:         http.StatusRequestEntityTooLarge,
	CodeValidation:       http.StatusUnprocessableEntity,
	CodeInternal:         http.StatusInternalServerError,
}

// restHandler serves one endpoint: it returns the status and body to send, or an error.
type restHandler func(r *http.Request) (int, any, error)

// RegisterHTTP registers the admin REST API (DESIGN §8) on mux. Every route requires an admin
// bearer token; reads accept the viewer role, writes need the admin role.
func RegisterHTTP(mux *http.ServeMux, s *Service) {
	h := func(pattern string, need Role, fn restHandler) {
		mux.Handle(pattern, s.restEndpoint(need, fn))
	}
	const (
		read  = RoleViewer
		write = RoleAdmin
	)
	// Price rules.
	h("GET /admin/price-rules", read, func(r *http.Request) (int, any, error) {
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		p, err := s.ListPriceRules(r.Context(), limit, cursor)
		return http.StatusOK, p, err
	})
	h("POST /admin/price-rules", write, func(r *http.Request) (int, any, error) {
		var in PriceRuleInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		if in.EffectiveAt != nil {
			if in.ID == 0 {
				return 0, nil, invalidFields("invalid price rule", field("effective_at",
					"a new rule takes effect when created: create it disabled now and schedule enabling it"))
			}
			out, err := s.SchedulePriceRule(r.Context(), in.ID, in)
			return http.StatusAccepted, out, err
		}
		out, err := s.CreatePriceRule(r.Context(), in)
		if in.ID != 0 {
			return http.StatusOK, out, err
		}
		return http.StatusCreated, out, err
	})
	h("POST /admin/price-rules/quote", read, func(r *http.Request) (int, any, error) {
		var in QuoteRequest
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.Quote(r.Context(), in)
		return http.StatusOK, out, err
	})
	h("GET /admin/price-rules/{id}", read, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetPriceRule(r.Context(), id)
		return http.StatusOK, out, err
	})
	h("PUT /admin/price-rules/{id}", write, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in PriceRuleInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		if in.EffectiveAt != nil {
			out, err := s.SchedulePriceRule(r.Context(), id, in)
			return http.StatusAccepted, out, err
		}
		out, err := s.UpdatePriceRule(r.Context(), id, in)
		return http.StatusOK, out, err
	})
	h("DELETE /admin/price-rules/{id}", write, deleteBy("id", s.DeletePriceRule))
	h("GET /admin/price-rules/scheduled", read, func(r *http.Request) (int, any, error) {
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
	})
	h("DELETE /admin/price-rules/scheduled/{id}", write, deleteBy("id", s.CancelScheduledPriceRule))

	// Price catalogs (plan, apply, provenance).
	registerCatalogHTTP(mux, s)
	// The audit log.
	registerAuditHTTP(mux, s)

	// Providers and credentials.
	h("GET /admin/providers", read, func(r *http.Request) (int, any, error) {
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		p, err := s.ListProviders(r.Context(), limit, cursor)
		return http.StatusOK, p, err
	})
	h("POST /admin/providers", write, func(r *http.Request) (int, any, error) {
		var in ProviderInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateProvider(r.Context(), in)
		return http.StatusCreated, out, err
	})
	h("GET /admin/providers/{id}", read, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetProvider(r.Context(), id)
		return http.StatusOK, out, err
	})
	h("PUT /admin/providers/{id}", write, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in ProviderInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.UpdateProvider(r.Context(), id, in)
		return http.StatusOK, out, err
	})
	h("DELETE /admin/providers/{id}", write, deleteBy("id", s.DeleteProvider))
	h("POST /admin/providers/{id}/credentials", write, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in CredentialInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		if in.ProviderID != 0 && in.ProviderID != id {
			return 0, nil, invalidFields("invalid credential", field("provider_id", "body provider_id %d does not match path id %d", in.ProviderID, id))
		}
		in.ProviderID = id
		out, err := s.CreateCredential(r.Context(), in)
		return http.StatusCreated, out, err
	})
	h("DELETE /admin/credentials/{id}", write, deleteBy("id", s.DeleteCredential))

	// Routing rules.
	h("GET /admin/providers/{id}/routing-rules", read, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListRoutingRules(r.Context(), id)
		return http.StatusOK, Page[store.RoutingRule]{Items: nonNil(out)}, err
	})
	h("PUT /admin/providers/{id}/routing-rules", write, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in struct {
			Rules []RoutingRuleInput `json:"rules"`
		}
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.UpsertRoutingRules(r.Context(), id, in.Rules)
		return http.StatusOK, Page[store.RoutingRule]{Items: nonNil(out)}, err
	})
	h("POST /admin/providers/{provider_id}/routing-rules/reset", write, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "provider_id")
		if err != nil {
			return 0, nil, err
		}
		if err := emptyBody(r); err != nil {
			return 0, nil, err
		}
		out, err := s.ResetRoutingRules(r.Context(), id)
		return http.StatusOK, Page[store.RoutingRule]{Items: nonNil(out)}, err
	})
	h("DELETE /admin/providers/{provider_id}/routing-rules/{operation}/{kind}", write, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "provider_id")
		if err != nil {
			return 0, nil, err
		}
		if err := emptyBody(r); err != nil {
			return 0, nil, err
		}
		return http.StatusNoContent, nil, s.DeleteRoutingRule(r.Context(), id, r.PathValue("operation"), r.PathValue("kind"))
	})

	// Routes.
	h("GET /admin/routes", read, func(r *http.Request) (int, any, error) {
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		p, err := s.ListRoutes(r.Context(), limit, cursor)
		return http.StatusOK, p, err
	})
	h("POST /admin/routes", write, func(r *http.Request) (int, any, error) {
		var in RouteInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateRoute(r.Context(), in)
		return http.StatusCreated, out, err
	})
	h("GET /admin/routes/{id}", read, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetRoute(r.Context(), id)
		return http.StatusOK, out, err
	})
	h("PUT /admin/routes/{id}", write, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in RouteInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.UpdateRoute(r.Context(), id, in)
		return http.StatusOK, out, err
	})
	h("DELETE /admin/routes/{id}", write, deleteBy("id", s.DeleteRoute))

	// Tenancy.
	h("POST /admin/orgs", write, func(r *http.Request) (int, any, error) {
		var in store.Org
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateOrg(r.Context(), in)
		return http.StatusCreated, out, err
	})
	h("POST /admin/teams", write, func(r *http.Request) (int, any, error) {
		var in store.Team
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateTeam(r.Context(), in)
		return http.StatusCreated, out, err
	})
	h("POST /admin/users", write, func(r *http.Request) (int, any, error) {
		var in store.User
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateUser(r.Context(), in)
		return http.StatusCreated, out, err
	})
	h("POST /admin/api-keys", write, func(r *http.Request) (int, any, error) {
		var in APIKeyInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.CreateAPIKey(r.Context(), in)
		return http.StatusCreated, out, err
	})

	// Key lifecycle, tenants, model policy (tenancy_rest.go); budget alerts (alerts_rest.go).
	registerTenancyHTTP(mux, s)
	registerReconcileHTTP(mux, s) // reconciliation (reconcile_rest.go)
	registerAlertsHTTP(mux, s)
	registerBurnHTTP(mux, s) // budget burn (burn.go)

	// Quotas and usage.
	h("GET /admin/quotas/{scope}/{id}", read, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetQuota(r.Context(), r.PathValue("scope"), id)
		return http.StatusOK, out, err
	})
	h("PUT /admin/quotas/{scope}/{id}", write, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in QuotaInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.SetQuota(r.Context(), r.PathValue("scope"), id, in)
		return http.StatusOK, out, err
	})
	h("POST /admin/quotas/{scope}/{id}/adjustments", write, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in AdjustmentInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		who, err := s.Authenticate(r.Context(), r.Header.Get("Authorization"))
		if err != nil {
			return 0, nil, err
		}
		out, err := s.AdjustQuota(r.Context(), who, r.PathValue("scope"), id, in)
		return http.StatusCreated, out, err
	})
	h("GET /admin/quotas/{scope}/{id}/adjustments", read, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListQuotaAdjustments(r.Context(), r.PathValue("scope"), id, limit, cursor)
		return http.StatusOK, out, err
	})
	h("GET /admin/snapshot-status", read, func(r *http.Request) (int, any, error) {
		out, err := s.SnapshotStatus(r.Context())
		return http.StatusOK, out, err
	})
	h("GET /admin/usages", read, func(r *http.Request) (int, any, error) {
		q, err := usageQuery(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListUsages(r.Context(), q)
		return http.StatusOK, out, err
	})

	registerSpendHTTP(mux, s)

	// Import and export.
	h("GET /admin/export", read, func(r *http.Request) (int, any, error) {
		out, err := s.Export(r.Context())
		return http.StatusOK, out, err
	})
	h("POST /admin/import", write, func(r *http.Request) (int, any, error) {
		in, err := decodeImport(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.Import(r.Context(), in)
		return http.StatusOK, out, err
	})

	// Admin tokens.
	h("GET /admin/admin-tokens", read, func(r *http.Request) (int, any, error) {
		out, err := s.ListAdminTokens(r.Context())
		return http.StatusOK, Page[store.AdminToken]{Items: nonNil(out)}, err
	})
	h("POST /admin/admin-tokens", write, func(r *http.Request) (int, any, error) {
		var in struct {
			Name string `json:"name"`
			Role string `json:"role"`
		}
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		t, tok, err := s.CreateAdminToken(r.Context(), in.Name, in.Role)
		return http.StatusCreated, struct {
			store.AdminToken
			Token string `json:"token"`
		}{t, tok}, err
	})
	h("DELETE /admin/admin-tokens/{id}", write, deleteBy("id", s.DeleteAdminToken))

	// Data-plane tokens (docs/security.md): revoking keeps the row, so DELETE answers the revoked token.
	h("GET /admin/dataplane-tokens", read, func(r *http.Request) (int, any, error) {
		out, err := s.ListDataPlaneTokens(r.Context())
		return http.StatusOK, Page[store.DataPlaneToken]{Items: nonNil(out)}, err
	})
	h("POST /admin/dataplane-tokens", write, func(r *http.Request) (int, any, error) {
		var in struct {
			Name   string   `json:"name"`
			Scopes []string `json:"scopes"`
		}
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		t, tok, err := s.CreateDataPlaneToken(r.Context(), in.Name, in.Scopes)
		return http.StatusCreated, struct {
			store.DataPlaneToken
			Token string `json:"token"`
		}{t, tok}, err
	})
	h("DELETE /admin/dataplane-tokens/{id}", write, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		if err := emptyBody(r); err != nil {
			return 0, nil, err
		}
		t, err := s.RevokeDataPlaneToken(r.Context(), id)
		return http.StatusOK, t, err
	})
	h("GET /admin/whoami", read, func(r *http.Request) (int, any, error) {
		p, err := s.Authenticate(r.Context(), r.Header.Get("Authorization"))
		return http.StatusOK, map[string]string{"role": p.Role.String(), "name": p.Name}, err
	})
	// Quota periods (docs/budgets.md).
	h("GET /admin/quotas/{scope}/{id}/periods", read, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		limit, cursor, err := pageParams(r)
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListQuotaPeriods(r.Context(), r.PathValue("scope"), id, limit, cursor)
		return http.StatusOK, out, err
	})
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func deleteBy(name string, del func(ctx context.Context, id int64) error) restHandler {
	return func(r *http.Request) (int, any, error) {
		id, err := pathID(r, name)
		if err != nil {
			return 0, nil, err
		}
		if err := emptyBody(r); err != nil {
			return 0, nil, err
		}
		return http.StatusNoContent, nil, del(r.Context(), id)
	}
}

// restEndpoint authenticates, runs fn and writes its JSON answer or error.
func (s *Service) restEndpoint(need Role, fn restHandler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authorize(r.Context(), r.Header.Get("Authorization"), need)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		r = r.WithContext(WithPrincipal(r.Context(), p))
		status, body, err := fn(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if status == http.StatusNoContent {
			w.WriteHeader(status)
			return
		}
		writeJSON(w, status, body)
	})
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		http.Error(w, `{"error":{"code":"internal","message":"encode response","details":[]}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorBody is the admin error shape: {"error":{"code","message","details":[…]}}.
type errorBody struct {
	Error struct {
		Code    Code     `json:"code"`
		Message string   `json:"message"`
		Details []Detail `json:"details"`
	} `json:"error"`
}

func (s *Service) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *Error
	if !errors.As(err, &ae) {
		ae = &Error{Code: CodeInternal, Message: "internal error", Cause: err}
	}
	status, ok := httpStatus[ae.Code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if status >= 500 {
		s.log.Error("admin request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	} else {
		s.log.Debug("admin request refused", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	var body errorBody
	body.Error.Code, body.Error.Message, body.Error.Details = ae.Code, ae.Message, nonNil(ae.Details)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-admin"`)
	}
	writeJSON(w, status, body)
}

// decodeBody decodes one JSON value into v, refusing unknown fields, trailing data and bodies over
// limit (413).
func decodeBody(r *http.Request, limit int64, v any) error {
	body, err := readBody(r, limit)
	if err != nil {
		return err
	}
	return decodeStrict(body, v)
}

func readBody(r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, errorf(CodeInvalid, "read body: %v", err)
	}
	if int64(len(body)) > limit {
		return nil, errorf(CodeTooLarge, "request body is larger than %d bytes", limit)
	}
	return body, nil
}

// decodeStrict decodes exactly one JSON value with unknown fields refused.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(CodeInvalid, "malformed JSON: unexpected data after the JSON value")
	}
	return nil
}

// jsonError describes a decoding failure as a 400 naming the field where the decoder says.
func jsonError(err error) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errorf(CodeInvalid, "malformed JSON: empty body")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(CodeInvalid, "malformed JSON: unexpected end of input")
	case errors.As(err, &syn):
		return errorf(CodeInvalid, "malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		f := jsonPath(typ.Field)
		if f == "" {
			f = "(body)"
		}
		return &Error{Code: CodeInvalid, Message: "wrong JSON type",
			Details: []Detail{field(f, "want %s, got JSON %s", typeName(typ.Type.String()), typ.Value)}}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return &Error{Code: CodeInvalid, Message: "unknown field", Details: []Detail{field(name, "unknown field")}}
	}
	return errorf(CodeInvalid, "malformed JSON: %v", err)
}

// jsonPath is the JSON key path of a decoding error's field: encoding/json names an embedded struct by its
// Go type (e.g. "RuleInput.input_price" for PriceRuleInput's embedded pricing.RuleInput), which is not a key
// the client wrote. Every key of this API is lower snake_case, so an upper-case segment is such a name.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	keep := parts[:0]
	for _, p := range parts {
		if p != "" && !unicode.IsUpper(rune(p[0])) {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ".")
}

func typeName(goType string) string {
	switch {
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "string"):
		return "a string"
	case strings.Contains(goType, "bool"):
		return "a boolean"
	case strings.HasPrefix(goType, "[]") || strings.HasPrefix(goType, "*[]"):
		return "an array"
	case strings.Contains(goType, "Time"):
		return "an RFC 3339 timestamp string"
	}
	return "an object"
}

func emptyBody(r *http.Request) error {
	body, err := readBody(r, MaxBodyBytes)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		return errorf(CodeInvalid, "this endpoint takes no request body")
	}
	return nil
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

// pathID parses a positive integer path parameter.
func pathID(r *http.Request, name string) (int64, error) {
	v := r.PathValue(name)
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, errorf(CodeInvalid, "%s must be a positive integer, got %q", name, v)
	}
	return id, nil
}

func pageParams(r *http.Request) (int, string, error) {
	q := r.URL.Query()
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, "", errorf(CodeInvalid, "limit must be an integer, got %q", v)
		}
		if n <= 0 {
			return 0, "", errorf(CodeInvalid, "limit must be between 1 and %d, got %d", MaxPageSize, n)
		}
		limit = n
	}
	return limit, q.Get("cursor"), nil
}
