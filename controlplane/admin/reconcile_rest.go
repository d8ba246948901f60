package admin

import (
	"bytes"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/controlplane/store"
)

// registerReconcileHTTP registers the reconciliation endpoints (docs/admin-api.md, "Reconciliation").
func registerReconcileHTTP(mux *http.ServeMux, s *Service) {
	h := func(pattern string, need Role, fn restHandler) {
		mux.Handle(pattern, s.restEndpoint(need, fn))
	}
	h("GET /admin/reconciliation/providers", RoleViewer, func(r *http.Request) (int, any, error) {
		if err := onlyParams(r.URL.Query()); err != nil {
			return 0, nil, err
		}
		out, err := s.ListReconcileProviders(r.Context())
		return http.StatusOK, Page[store.ReconcileProvider]{Items: nonNil(out)}, err
	})
	h("PUT /admin/reconciliation/providers/{id}", RoleAdmin, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in ReconcileProviderInput
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.PutReconcileProvider(r.Context(), id, in)
		return http.StatusOK, out, err
	})
	h("DELETE /admin/reconciliation/providers/{id}", RoleAdmin, deleteBy("id", s.DeleteReconcileProvider))
	h("GET /admin/reconciliation/providers/{id}/credential-refs", RoleViewer, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListCredentialRefs(r.Context(), id)
		return http.StatusOK, Page[store.CredentialRef]{Items: nonNil(out)}, err
	})
	h("PUT /admin/reconciliation/credential-refs/{id}", RoleAdmin, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		var in struct {
			KeyRef     string `json:"key_ref"`
			ProjectRef string `json:"project_ref"`
		}
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		return http.StatusNoContent, nil, s.SetCredentialRef(r.Context(), id, in.KeyRef, in.ProjectRef)
	})
	h("POST /admin/reconciliation/providers/{id}/reports", RoleAdmin, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		data, err := io.ReadAll(io.LimitReader(r.Body, MaxImportBytes+1))
		if err != nil {
			return 0, nil, errorf(CodeInvalid, "read report file: %v", err)
		}
		if len(data) > MaxImportBytes {
			return 0, nil, errorf(CodeTooLarge, "report file larger than %d bytes", MaxImportBytes)
		}
		out, err := s.ImportReconcileFile(r.Context(), id, bytes.NewReader(data))
		return http.StatusOK, Page[ImportedDaySummary]{Items: nonNil(out)}, err
	})
	h("POST /admin/reconciliation/runs", RoleAdmin, func(r *http.Request) (int, any, error) {
		var in struct {
			ProviderID int64  `json:"provider_id"`
			Day        string `json:"day"`
			Reimport   *bool  `json:"reimport"`
		}
		if err := decodeBody(r, MaxBodyBytes, &in); err != nil {
			return 0, nil, err
		}
		out, err := s.RunReconciliation(r.Context(), in.ProviderID, in.Day, in.Reimport == nil || *in.Reimport)
		return http.StatusCreated, out, err
	})
	h("GET /admin/reconciliation/runs", RoleViewer, func(r *http.Request) (int, any, error) {
		q := r.URL.Query()
		if err := onlyParams(q, "limit", "cursor", "provider_id", "from", "to", "status"); err != nil {
			return 0, nil, err
		}
		if err := idParamsErr(q, "provider_id"); err != nil {
			return 0, nil, err
		}
		in := ReconcileRunQuery{ProviderID: idParam(q, "provider_id"), From: q.Get("from"), To: q.Get("to"), Status: q.Get("status")}
		var err error
		if in.Limit, in.Cursor, err = pageParams(r); err != nil {
			return 0, nil, err
		}
		out, err := s.ListReconcileRuns(r.Context(), in)
		return http.StatusOK, out, err
	})
	h("GET /admin/reconciliation/runs/{id}", RoleViewer, func(r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetReconcileRun(r.Context(), id)
		return http.StatusOK, out, err
	})
	h("GET /admin/reconciliation/drift", RoleViewer, func(r *http.Request) (int, any, error) {
		q := r.URL.Query()
		if err := onlyParams(q, "provider_id", "from", "to"); err != nil {
			return 0, nil, err
		}
		if err := idParamsErr(q, "provider_id"); err != nil {
			return 0, nil, err
		}
		out, err := s.GetDrift(r.Context(), q.Get("from"), q.Get("to"), idParam(q, "provider_id"))
		return http.StatusOK, map[string]any{"items": out}, err
	})
}
