package proxy

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/dataplane/admission"
	"github.com/tollgate/tollgate/dataplane/httperr"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	settlementv1 "github.com/tollgate/tollgate/shared/gen/tollgate/settlement/v1"
	"github.com/tollgate/tollgate/shared/vocab"
)

// CostLookup is the source of GET /v1/requests/{request_id}/cost (dataplane/reqcost): the settled row from
// the control plane, else the cost-lookup marker admission wrote (docs/cost.md, "Cost by request id").
type CostLookup interface {
	// Settled answers the settled row of requestID made with keyID; found is false when there is none.
	Settled(ctx context.Context, keyID int64, requestID string) (rc *settlementv1.RequestCost, found bool, err error)
	// Made reports whether the marker of requestID names keyID.
	Made(ctx context.Context, orgID, keyID int64, requestID string) (bool, error)
	// Mark writes the marker of a request admitted without a Redis round trip.
	Mark(ctx context.Context, orgID, keyID int64, requestID string) error
}

// costLookupID returns the request id of a cost lookup path, /v1/requests/{request_id}/cost.
func costLookupID(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/v1/requests/")
	if !ok {
		return "", false
	}
	id, ok := strings.CutSuffix(rest, "/cost")
	return id, ok && id != "" && !strings.Contains(id, "/")
}

// keyFamily is the dialect a request without a dialect path is answered in: the one its key's header
// implies (x-api-key beta, x-goog-api-key or ?key= gamma, else alpha).
func keyFamily(r *http.Request) vocab.Kind {
	switch {
	case r.Header.Get("Authorization") != "":
		return vocab.KindAlpha
	case r.Header.Get("X-Api-Key") != "":
		return vocab.KindBeta
	case r.Header.Get("X-Goog-Api-Key") != "", strings.Contains(r.URL.RawQuery, "key="):
		return vocab.KindGamma
	}
	return vocab.KindAlpha
}

// errNoSuchRequest is the one answer for an unknown request id and for another key's: a key cannot learn
// whether an id exists.
func errNoSuchRequest() *httperr.Error {
	return &httperr.Error{Status: http.StatusNotFound, Code: httperr.CodeNotFound,
		Message: "no request with this id was made with this API key"}
}

// authenticate resolves the client's key into c (snapshot, key), refusing a missing, unknown or unusable one.
func (h *Handler) authenticate(r *http.Request, c *call) error {
	snap := h.o.Snapshot()
	if snap == nil {
		return &httperr.Error{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: "the gateway has no configuration yet"}
	}
	c.snap = snap
	secret := clientKey(r)
	if secret == "" {
		return httperr.Unauthorized("missing API key")
	}
	key := snap.LookupKey(secret)
	if key == nil {
		return httperr.Unauthorized("invalid API key")
	}
	if !key.Usable(c.start) {
		return httperr.Unauthorized("API key is disabled or expired")
	}
	c.key = key
	return nil
}

// lookupCost answers GET /v1/requests/{request_id}/cost: settled (the control plane's row), pending (the
// marker names this key; Retry-After: 1), else 404 — the same 404 for an unknown id and another key's. The
// control plane or Redis unreachable is a 503 with Retry-After, never a guess.
func (h *Handler) lookupCost(w http.ResponseWriter, r *http.Request, c *call, id string) error {
	c.class.Kind = keyFamily(r)
	if err := h.authenticate(r, c); err != nil {
		return err
	}
	if !c.snap.DisclosesCost(c.key) || h.o.Costs == nil {
		return httperr.NotFound(r.Method, r.URL.Path) // as an unknown path (docs/cost.md, "Turning it off")
	}
	if !admission.ValidRequestID(id) {
		return errNoSuchRequest()
	}
	ctx := r.Context()
	rc, found, err := h.o.Costs.Settled(ctx, c.key.ID, id)
	if err != nil {
		return lookupUnavailable(err)
	}
	if found {
		writeJSON(w, http.StatusOK, settledJSON(id, rc))
		return nil
	}
	made, err := h.o.Costs.Made(ctx, c.key.OrgID, c.key.ID, id)
	if err != nil {
		return lookupUnavailable(err)
	}
	if !made {
		return errNoSuchRequest()
	}
	var jw jsonkit.Writer
	jw.Open('{')
	jw.Key("object")
	jw.Str("request.cost")
	jw.Key("request_id")
	jw.Str(id)
	jw.Key("status")
	jw.Str("pending")
	jw.Close('}')
	w.Header()["Retry-After"] = []string{"1"}
	writeJSON(w, http.StatusOK, jw.B)
	return nil
}

func lookupUnavailable(err error) *httperr.Error {
	return &httperr.Error{Status: http.StatusServiceUnavailable, Code: "cost_lookup_unavailable",
		Message: "the request's cost cannot be looked up right now; retry shortly", RetryAfter: time.Second, Cause: err}
}

// settledJSON is the answer of a settled request (docs/cost.md): the usage row.
func settledJSON(id string, rc *settlementv1.RequestCost) []byte {
	var w jsonkit.Writer
	w.Open('{')
	str := func(k, v string) {
		w.Key(k)
		w.Str(v)
	}
	num := func(k string, v int64) {
		w.Key(k)
		w.Int(v)
	}
	str("object", "request.cost")
	str("request_id", id)
	str("status", "settled")
	str("cost", rc.GetCost())
	num("price_rule_id", rc.GetPriceRuleId())
	num("price_rule_version", rc.GetPriceRuleVersion())
	if rc.GetServedTier() != "" {
		str("service_tier", rc.GetServedTier())
	}
	str("usage_source", rc.GetSource())
	str("end_state", rc.GetEndState())
	num("http_status", int64(rc.GetHttpStatus()))
	str("model", rc.GetLogicalModel())
	str("operation", rc.GetOperation())
	if rc.GetBillingFlag() != "" {
		str("billing_flag", rc.GetBillingFlag())
	}
	t := rc.GetTokens()
	w.Key("usage")
	w.Open('{')
	num("input_tokens", t.GetInput())
	num("output_tokens", t.GetOutput())
	num("cache_read_tokens", t.GetCacheRead())
	num("cache_creation_5m_tokens", t.GetCacheCreation_5M())
	num("cache_creation_30m_tokens", t.GetCacheCreation_30M())
	num("cache_creation_1h_tokens", t.GetCacheCreation_1H())
	num("image_output_tokens", t.GetImageOutput())
	w.Close('}')
	if rc.GetCreatedAt() != nil {
		str("created_at", rc.GetCreatedAt().AsTime().UTC().Format(time.RFC3339Nano))
	}
	if rc.GetSettledAt() != nil {
		str("settled_at", rc.GetSettledAt().AsTime().UTC().Format(time.RFC3339Nano))
	}
	w.Close('}')
	return w.B
}

// markAsync writes the cost-lookup marker of a request that admission let through without a Redis round
// trip (no limit, no quota), off the request path: the lookup says pending from then on.
func (h *Handler) markAsync(ctx context.Context, c *call) {
	costs, org, key, id := h.o.Costs, c.key.OrgID, c.key.ID, c.reqID
	go func() {
		if err := costs.Mark(context.WithoutCancel(ctx), org, key, id); err != nil {
			h.o.Log.Warn("cost-lookup marker not written", "request_id", id, "err", err)
		}
	}()
}
