package admin

import (
	"bytes"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/controlplane/store"
)

// reconcileOps are the reconciliation operations (docs/admin-api.md, "Reconciliation"; reconcile_grpc.go).
var reconcileOps = []operation{
	{role: RoleViewer, rest: "GET /admin/reconciliation/providers", grpc: "ListReconciliationProviders", serve: func(s *Service, r *http.Request) (int, any, error) {
		if err := onlyParams(r.URL.Query()); err != nil {
			return 0, nil, err
		}
		out, err := s.ListReconcileProviders(r.Context())
		return http.StatusOK, Page[store.ReconcileProvider]{Items: nonNil(out)}, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/reconciliation/providers/{id}", grpc: "SetReconciliationProvider", serve: func(s *Service, r *http.Request) (int, any, error) {
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
	}},
	{role: RoleAdmin, rest: "DELETE /admin/reconciliation/providers/{id}", serve: deleteBy("id", (*Service).DeleteReconcileProvider)},
	{role: RoleViewer, rest: "GET /admin/reconciliation/providers/{id}/credential-refs", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.ListCredentialRefs(r.Context(), id)
		return http.StatusOK, Page[store.CredentialRef]{Items: nonNil(out)}, err
	}},
	{role: RoleAdmin, rest: "PUT /admin/reconciliation/credential-refs/{id}", grpc: "SetReconciliationCredentialRef", serve: func(s *Service, r *http.Request) (int, any, error) {
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
	}},
	{role: RoleAdmin, rest: "POST /admin/reconciliation/providers/{id}/reports", serve: func(s *Service, r *http.Request) (int, any, error) {
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
	}},
	{role: RoleAdmin, rest: "POST /admin/reconciliation/runs", grpc: "RunReconciliation", serve: func(s *Service, r *http.Request) (int, any, error) {
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
	}},
	{role: RoleViewer, rest: "GET /admin/reconciliation/runs", grpc: "ListReconciliationRuns", serve: func(s *Service, r *http.Request) (int, any, error) {
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
	}},
	{role: RoleViewer, rest: "GET /admin/reconciliation/runs/{id}", grpc: "GetReconciliationRun", serve: func(s *Service, r *http.Request) (int, any, error) {
		id, err := pathID(r, "id")
		if err != nil {
			return 0, nil, err
		}
		out, err := s.GetReconcileRun(r.Context(), id)
		return http.StatusOK, out, err
	}},
	{role: RoleViewer, rest: "GET /admin/reconciliation/drift", grpc: "GetReconciliationDrift", serve: func(s *Service, r *http.Request) (int, any, error) {
		q := r.URL.Query()
		if err := onlyParams(q, "provider_id", "from", "to"); err != nil {
			return 0, nil, err
		}
		if err := idParamsErr(q, "provider_id"); err != nil {
			return 0, nil, err
		}
		out, err := s.GetDrift(r.Context(), q.Get("from"), q.Get("to"), idParam(q, "provider_id"))
		return http.StatusOK, map[string]any{"items": out}, err
	}},
}
