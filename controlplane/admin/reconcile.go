package admin

import (
	"context"
	"errors"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/tollgate/controlplane/reconcile"
	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/pricing"
)

// Reconciliation (docs/reconciliation.md): provider admin access, credential mappings, report imports,
// runs and drift. The admin key is write-only: it is sealed at once and never returned.

// ReconcileProviderInput sets a provider's reconciliation. AdminKey nil keeps the stored key.
type ReconcileProviderInput struct {
	Kind      string  `json:"kind"`
	BaseURL   string  `json:"base_url"`
	AdminKey  *string `json:"admin_key"`
	Enabled   *bool   `json:"enabled"`
	BucketBy  string  `json:"bucket_by"`
	LateHours *int32  `json:"late_hours"`
	TokensAbs *int64  `json:"tokens_abs"`
	TokensRel *string `json:"tokens_rel"`
	CostAbs   *string `json:"cost_abs"`
	CostRel   *string `json:"cost_rel"`
}

// runner is the reconciliation runner on-demand runs use (built once).
func (s *Service) runner() *reconcile.Runner {
	s.reconcileOnce.Do(func() {
		s.reconciler = reconcile.NewRunner(s.pool, s.box, s.log, reconcile.Options{})
	})
	return s.reconciler
}

// SetReconciler replaces the runner on-demand runs use (the control plane passes the scheduler's).
func (s *Service) SetReconciler(r *reconcile.Runner) {
	s.reconcileOnce.Do(func() {})
	s.reconciler = r
}

// ListReconcileProviders lists every provider's reconciliation settings.
func (s *Service) ListReconcileProviders(ctx context.Context) ([]store.ReconcileProvider, error) {
	out, err := store.ListReconcileProviders(ctx, s.pool)
	return out, storeError(err, "reconciliation settings")
}

// PutReconcileProvider creates or replaces a provider's reconciliation settings.
func (s *Service) PutReconcileProvider(ctx context.Context, providerID int64, in ReconcileProviderInput) (store.ReconcileProvider, error) {
	var details []Detail
	switch in.Kind {
	case reconcile.KindOpenAI, reconcile.KindAnthropic:
		if u, err := url.Parse(in.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			details = append(details, field("base_url", "must be an http(s) URL of the provider's admin API, got %q", in.BaseURL))
		}
	case reconcile.KindCSV:
		if in.AdminKey != nil {
			details = append(details, field("admin_key", "a csv provider has no admin key"))
		}
	default:
		details = append(details, field("kind", "must be openai, anthropic or csv, got %q", in.Kind))
	}
	if in.AdminKey != nil && strings.TrimSpace(*in.AdminKey) == "" {
		details = append(details, field("admin_key", "must not be empty"))
	}
	if in.BucketBy == "" {
		in.BucketBy = "end"
	}
	if in.BucketBy != "end" && in.BucketBy != "start" {
		details = append(details, field("bucket_by", "must be end or start, got %q", in.BucketBy))
	}
	late := int32(24)
	if in.LateHours != nil {
		late = *in.LateHours
	}
	if late < 0 || late > 720 {
		details = append(details, field("late_hours", "must be 0 to 720, got %d", late))
	}
	if in.TokensAbs != nil && *in.TokensAbs < 0 {
		details = append(details, field("tokens_abs", "must not be negative"))
	}
	for name, v := range map[string]*string{"tokens_rel": in.TokensRel, "cost_abs": in.CostAbs, "cost_rel": in.CostRel} {
		if v == nil {
			continue
		}
		d, err := pricing.ParseDecimal(*v)
		if err != nil || d.Sign() < 0 {
			details = append(details, field(name, "must be a non-negative decimal, got %q", *v))
		}
	}
	if len(details) > 0 {
		return store.ReconcileProvider{}, invalidFields("invalid reconciliation settings", details...)
	}
	var sealed []byte
	if in.AdminKey != nil {
		var err error
		if sealed, err = s.box.Seal([]byte(*in.AdminKey)); err != nil {
			return store.ReconcileProvider{}, err
		}
	} else if in.Kind != reconcile.KindCSV {
		cur, err := store.GetReconcileProvider(ctx, s.pool, providerID)
		if err != nil || !cur.HasAdminKey {
			return store.ReconcileProvider{}, invalidFields("invalid reconciliation settings", field("admin_key", "required for kind %s", in.Kind))
		}
	}
	enabled := in.Enabled == nil || *in.Enabled
	out, err := store.PutReconcileProvider(ctx, s.pool, store.ReconcileProvider{ProviderID: providerID, Kind: in.Kind, BaseURL: in.BaseURL,
		Enabled: enabled, BucketBy: in.BucketBy, LateHours: late, TokensAbs: in.TokensAbs, TokensRel: in.TokensRel, CostAbs: in.CostAbs,
		CostRel: in.CostRel}, sealed)
	return out, storeError(err, "reconciliation settings")
}

// DeleteReconcileProvider removes a provider's reconciliation settings; its runs stay.
func (s *Service) DeleteReconcileProvider(ctx context.Context, providerID int64) error {
	return storeError(store.DeleteReconcileProvider(ctx, s.pool, providerID), "reconciliation settings")
}

// ListCredentialRefs lists the provider-side key and project of a provider's credentials.
func (s *Service) ListCredentialRefs(ctx context.Context, providerID int64) ([]store.CredentialRef, error) {
	out, err := store.ListCredentialRefs(ctx, s.pool, providerID)
	return out, storeError(err, "credential mappings")
}

// SetCredentialRef maps a credential to its provider-side key and project (both empty: unmapped).
func (s *Service) SetCredentialRef(ctx context.Context, credentialID int64, keyRef, projectRef string) error {
	if len(keyRef) > 500 || len(projectRef) > 500 {
		return invalidFields("invalid credential mapping", field("key_ref", "at most 500 characters"))
	}
	return storeError(store.SetCredentialRef(ctx, s.pool, store.CredentialRef{CredentialID: credentialID, KeyRef: keyRef,
		ProjectRef: projectRef}), "credential mapping")
}

// ImportedDaySummary says what an import stored for one day.
type ImportedDaySummary struct {
	Day         string `json:"day"`
	Source      string `json:"source"`
	Complete    bool   `json:"complete"`
	ImportCount int32  `json:"import_count"`
	UsageRows   int    `json:"usage_rows"`
	CostRows    int    `json:"cost_rows"`
}

func summarize(days []store.ImportedDay) []ImportedDaySummary {
	out := make([]ImportedDaySummary, 0, len(days))
	for _, d := range days {
		out = append(out, ImportedDaySummary{Day: d.Day.Format(time.DateOnly), Source: d.Source, Complete: d.Complete,
			ImportCount: d.ImportCount, UsageRows: len(d.Usage), CostRows: len(d.Costs)})
	}
	return out
}

// ImportReconcileFile stores an uploaded CSV report (replacing the days it covers).
func (s *Service) ImportReconcileFile(ctx context.Context, providerID int64, body io.Reader) ([]ImportedDaySummary, error) {
	rep, err := reconcile.ParseCSV(body)
	if err != nil {
		return nil, invalidFields("invalid report file", field("file", "%v", err))
	}
	days, err := s.runner().ImportFile(ctx, providerID, rep)
	if errors.Is(err, reconcile.ErrNotConfigured) {
		return nil, errorf(CodeNotFound, "provider %d is not set up for reconciliation", providerID)
	}
	return summarize(days), storeError(err, "report")
}

// parseDay reads a YYYY-MM-DD UTC day.
func parseDay(name, v string) (time.Time, error) {
	d, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, errorf(CodeInvalid, "%s must be a day YYYY-MM-DD, got %q", name, v)
	}
	return d, nil
}

// RunReconciliation reconciles one provider and day now (re-importing it first unless reimport is false).
// A failed import is a stored failed run, returned as the answer.
func (s *Service) RunReconciliation(ctx context.Context, providerID int64, day string, reimport bool) (store.ReconcileRun, error) {
	d, err := parseDay("day", day)
	if err != nil {
		return store.ReconcileRun{}, err
	}
	if d.After(time.Now().UTC()) {
		return store.ReconcileRun{}, invalidFields("invalid run", field("day", "%s has not started", day))
	}
	run, err := s.runner().Reconcile(ctx, providerID, d, reconcile.TriggerManual, reimport)
	switch {
	case errors.Is(err, reconcile.ErrNotConfigured):
		return store.ReconcileRun{}, errorf(CodeNotFound, "provider %d is not set up for reconciliation", providerID)
	case err != nil && run.ID != 0:
		return store.GetReconcileRun(ctx, s.pool, run.ID) // the failed run says why
	case err != nil:
		return store.ReconcileRun{}, storeError(err, "reconciliation run")
	}
	return store.GetReconcileRun(ctx, s.pool, run.ID)
}

// ReconcileRunQuery filters ListReconcileRuns.
type ReconcileRunQuery struct {
	ProviderID *int64
	From, To   string // days
	Status     string
	Limit      int
	Cursor     string
}

// ListReconcileRuns lists runs, newest first, a page at a time.
func (s *Service) ListReconcileRuns(ctx context.Context, q ReconcileRunQuery) (Page[store.ReconcileRun], error) {
	limit, err := pageLimit(q.Limit)
	if err != nil {
		return Page[store.ReconcileRun]{}, err
	}
	before, err := decodeCursor(q.Cursor)
	if err != nil {
		return Page[store.ReconcileRun]{}, err
	}
	f := store.ReconcileRunFilter{ProviderID: q.ProviderID, Status: q.Status, BeforeID: before, Limit: limit}
	switch q.Status {
	case "", "ok", "drift", "failed":
	default:
		return Page[store.ReconcileRun]{}, errorf(CodeInvalid, "status must be ok, drift or failed, got %q", q.Status)
	}
	if q.From != "" {
		d, err := parseDay("from", q.From)
		if err != nil {
			return Page[store.ReconcileRun]{}, err
		}
		f.From = &d
	}
	if q.To != "" {
		d, err := parseDay("to", q.To)
		if err != nil {
			return Page[store.ReconcileRun]{}, err
		}
		f.To = &d
	}
	runs, err := store.ListReconcileRuns(ctx, s.pool, f)
	if err != nil {
		return Page[store.ReconcileRun]{}, storeError(err, "reconciliation runs")
	}
	return page(runs, limit, func(r store.ReconcileRun) int64 { return r.ID }), nil
}

// GetReconcileRun reads a run with its lines.
func (s *Service) GetReconcileRun(ctx context.Context, id int64) (store.ReconcileRun, error) {
	r, err := store.GetReconcileRun(ctx, s.pool, id)
	return r, storeError(err, "reconciliation run")
}

// GetDrift lists drift per provider, model and day over [from, to) (at most 92 days; default the last 30).
func (s *Service) GetDrift(ctx context.Context, from, to string, providerID *int64) ([]reconcile.DriftPoint, error) {
	end := time.Now().UTC().Truncate(reconcile.Day).Add(reconcile.Day)
	start := end.Add(-30 * reconcile.Day)
	var err error
	if from != "" {
		if start, err = parseDay("from", from); err != nil {
			return nil, err
		}
	}
	if to != "" {
		if end, err = parseDay("to", to); err != nil {
			return nil, err
		}
	}
	if !end.After(start) || end.Sub(start) > 92*reconcile.Day {
		return nil, errorf(CodeInvalid, "from must be before to, at most 92 days apart")
	}
	out, err := reconcile.DriftSeries(ctx, s.pool, start, end, providerID)
	return out, storeError(err, "drift")
}
