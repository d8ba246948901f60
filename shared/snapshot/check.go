package snapshot

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/vocab"
)

// MaxID is the largest row id a snapshot accepts and the admin API lets a client choose: 2^53−1, the
// largest integer a JSON number read by a browser (the console) carries exactly. Ids the database assigns
// stay far below it; a client-chosen id above it would also push the table's id sequence to where the next
// insert overflows.
const MaxID = 1<<53 - 1

// MaxClientID is the largest id a client may choose (admin upserts and imports): half of MaxID, so that
// after the id sequence is moved past a client-chosen id, at least 2^52 server-assigned ids remain below
// MaxID.
const MaxClientID = MaxID / 2

// MaxCount bounds client-set counts that travel as JSON numbers (a key's tpm_limit): 2^53−1 as well.
const MaxCount = 1<<53 - 1

// ElementError is one problem of one snapshot element, naming the row at fault so an operator can find it:
// Resource is "price rule", "provider", "routing rule", "route", "api key" or "quota"; ID the row id (the
// scope id for a quota); Name its name, prefix or scope where it has one; Field the field at fault ("" when
// the problem is the element as a whole).
type ElementError struct {
	Resource string `json:"resource"`
	ID       int64  `json:"id"`
	Name     string `json:"name,omitempty"`
	Field    string `json:"field,omitempty"`
	Message  string `json:"message"`
}

func (e *ElementError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d", e.Resource, e.ID)
	if e.Name != "" {
		fmt.Fprintf(&b, " (%q)", e.Name)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// CompileError is Compile's failure: every problem found, each naming its element.
type CompileError struct {
	Version  int64
	Problems []*ElementError
}

func (e *CompileError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Error()
	}
	return fmt.Sprintf("compile snapshot %d: %s", e.Version, strings.Join(parts, "\n"))
}

// Unwrap returns the problems, for errors.Is/As.
func (e *CompileError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// Problems lists the element errors of err (a *CompileError, an *ElementError, or errors joining and
// wrapping them).
func Problems(err error) []*ElementError {
	switch e := err.(type) {
	case nil:
		return nil
	case *ElementError:
		return []*ElementError{e}
	case *CompileError:
		return e.Problems
	case interface{ Unwrap() []error }:
		var out []*ElementError
		for _, x := range e.Unwrap() {
			out = append(out, Problems(x)...)
		}
		return out
	}
	return Problems(errors.Unwrap(err))
}

// problems collects element errors for one element.
type problems struct {
	resource, name string
	id             int64
	errs           []error
}

func (p *problems) add(field, format string, args ...any) {
	p.errs = append(p.errs, &ElementError{Resource: p.resource, ID: p.id, Name: p.name, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (p *problems) err() error { return errors.Join(p.errs...) }

// checkID records a problem when id is not in 1..MaxID.
func (p *problems) checkID(field string, id int64) {
	if id <= 0 || id > MaxID {
		p.add(field, "must be an integer from 1 to %d, got %d", int64(MaxID), id)
	}
}

// CheckPriceRule validates a price rule as Compile does (pricing.ParseRule, id range) and returns the
// compiled rule. The admin API calls it on every price-rule write.
func CheckPriceRule(pr *configv1.PriceRule) (*pricing.Rule, error) {
	p := &problems{resource: "price rule", id: pr.GetId(), name: pr.GetModelMatch()}
	p.checkID("id", pr.GetId())
	if pr.ProviderId != nil {
		p.checkID("provider_id", pr.GetProviderId())
	}
	ri := pricing.RuleInput{
		ID: pr.GetId(), ProviderID: pr.ProviderId, MatchType: pr.GetMatchType(), ModelMatch: pr.GetModelMatch(),
		InputPrice: pr.GetInputPrice(), OutputPrice: pr.GetOutputPrice(), CacheReadPrice: pr.GetCacheReadPrice(),
		CacheCreation5mPrice: pr.GetCacheCreation_5MPrice(), CacheCreation30mPrice: pr.GetCacheCreation_30MPrice(),
		CacheCreation1hPrice: pr.GetCacheCreation_1HPrice(), ImageOutputPrice: pr.GetImageOutputPrice(),
		Enabled: pr.GetEnabled(),
	}
	if len(pr.GetPricingTiersJson()) > 0 {
		raw, err := tiersJSON(pr.GetPricingTiersJson())
		if err != nil {
			p.add("pricing_tiers_json", "%v", err)
			return nil, p.err()
		}
		ri.PricingTiersJSON = raw
	}
	r, err := pricing.ParseRule(ri)
	if err != nil {
		var verr *pricing.ValidationError
		if !errors.As(err, &verr) {
			p.add("", "%v", err)
		}
		for _, fe := range verrProblems(verr) {
			f := fe.Field
			if fe.TierIndex >= 0 {
				f = fmt.Sprintf("pricing_tiers_json[%d].%s", fe.TierIndex, fe.Field)
			}
			p.add(f, "%s", fe.Message)
		}
	}
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	return r, nil
}

func verrProblems(v *pricing.ValidationError) []pricing.FieldError {
	if v == nil {
		return nil
	}
	return v.Problems
}

// CheckProvider validates a provider and its credentials as Compile does and returns the compiled
// provider (without routing cells).
func CheckProvider(pp *configv1.Provider) (*Provider, error) {
	p := &problems{resource: "provider", id: pp.GetId(), name: pp.GetName()}
	p.checkID("id", pp.GetId())
	if pp.GetName() == "" || strings.Contains(pp.GetName(), "/") {
		p.add("name", "must be non-empty and contain no '/' (a model is addressed as provider/model)")
	}
	ch := vocab.ChannelType(pp.GetChannelType())
	if !ch.Valid() {
		p.add("channel_type", "must be one of %v, got %q", vocab.ChannelTypes, pp.GetChannelType())
	}
	u, err := url.Parse(pp.GetBaseUrl())
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.add("base_url", "%q: want an absolute http(s) URL", pp.GetBaseUrl())
	}
	out := &Provider{
		ID: pp.GetId(), Name: pp.GetName(), Channel: ch, BaseURL: strings.TrimRight(pp.GetBaseUrl(), "/"),
		Enabled: pp.GetEnabled(), cells: make(map[OpKey]Cell),
	}
	if err := CheckUnpricedPolicy(pp.GetUnpricedPolicy()); err != nil {
		p.add("unpriced_policy", "%v", err)
	}
	out.UnpricedDeny = pp.GetUnpricedPolicy() == UnpricedDeny
	if sj := strings.TrimSpace(pp.GetSettingsJson()); sj != "" {
		if !json.Valid([]byte(sj)) {
			p.add("settings", "is not valid JSON")
		}
		out.Settings = json.RawMessage(sj)
	}
	for _, cr := range pp.GetCredentials() {
		if !cr.GetEnabled() {
			continue
		}
		switch {
		case cr.GetProviderId() != 0 && cr.GetProviderId() != out.ID:
			p.add("credentials", "credential %d belongs to provider %d", cr.GetId(), cr.GetProviderId())
		case cr.GetSecret() == "":
			p.add("credentials", "credential %d: empty secret", cr.GetId())
		case cr.GetWeight() < 0:
			p.add("credentials", "credential %d: negative weight %d", cr.GetId(), cr.GetWeight())
		default:
			out.Credentials = append(out.Credentials, Credential{ID: cr.GetId(), Secret: cr.GetSecret(), Weight: max(1, cr.GetWeight())})
		}
	}
	if len(p.errs) > 0 {
		return nil, p.err()
	}
	return out, nil
}

// CheckRoutingRule validates one routing row on its own (vocabulary, kind constraints) and returns its
// cell; Compile also checks that its provider exists.
func CheckRoutingRule(r *configv1.RoutingRule) (Cell, error) {
	p := &problems{resource: "routing rule", id: r.GetId(), name: r.GetOperation() + "/" + r.GetKind()}
	p.checkID("id", r.GetId())
	op, kind := vocab.Operation(r.GetOperation()), vocab.Kind(r.GetKind())
	impl := vocab.Implementation(r.GetImplementation())
	switch {
	case !op.Valid():
		p.add("operation", "unknown operation %q", op)
	case !vocab.KindFits(op, kind):
		p.add("kind", "kind %q does not fit operation %q", kind, op)
	}
	if !impl.Valid() {
		p.add("implementation", "unknown implementation %q", impl)
	}
	cell := Cell{Impl: impl, RuleID: r.GetId()}
	if impl == vocab.ImplTransformTo && op.Valid() {
		cell.DestOp = op
		if d := r.GetDestOperation(); d != "" {
			cell.DestOp = vocab.Operation(d)
		}
		cell.DestKind = vocab.Kind(r.GetDestKind())
		switch {
		case !cell.DestOp.Valid():
			p.add("dest_operation", "unknown dest_operation %q", cell.DestOp)
		case cell.DestKind == "":
			cell = Cell{Impl: vocab.ImplUnsupported, RuleID: r.GetId()} // spec: transform_to without dest_kind
		case !vocab.KindFits(cell.DestOp, cell.DestKind):
			p.add("dest_kind", "dest_kind %q does not fit dest_operation %q", cell.DestKind, cell.DestOp)
		}
	}
	return cell, p.err()
}

// CheckRoute validates a route on its own: id, name, aliases, members' fields. Compile also checks that
// members name known providers and that names and aliases are unique.
func CheckRoute(rr *configv1.Route) error {
	p := &problems{resource: "route", id: rr.GetId(), name: rr.GetName()}
	p.checkID("id", rr.GetId())
	if rr.GetName() == "" {
		p.add("name", "must not be empty")
	}
	for i, a := range rr.GetAliases() {
		if a == "" {
			p.add(fmt.Sprintf("aliases[%d]", i), "must not be empty")
		}
	}
	for i, m := range rr.GetMembers() {
		if !m.GetEnabled() {
			continue
		}
		f := fmt.Sprintf("members[%d].", i)
		p.checkID(f+"provider_id", m.GetProviderId())
		if m.GetUpstreamModelId() == "" {
			p.add(f+"upstream_model_id", "must not be empty")
		}
		if m.GetWeight() < 0 {
			p.add(f+"weight", "must not be negative, got %d", m.GetWeight())
		}
	}
	return p.err()
}

// CheckAPIKey validates an API key on its own.
func CheckAPIKey(kk *configv1.ApiKey) error {
	p := &problems{resource: "api key", id: kk.GetId(), name: kk.GetPrefix()}
	p.checkID("id", kk.GetId())
	if len(kk.GetKeyHash()) != sha256.Size {
		p.add("key_hash", "must be %d bytes, got %d", sha256.Size, len(kk.GetKeyHash()))
	}
	if kk.GetRpmLimit() < 0 {
		p.add("rpm_limit", "must not be negative (0 = unlimited), got %d", kk.GetRpmLimit())
	}
	if kk.GetTpmLimit() < 0 || kk.GetTpmLimit() > MaxCount {
		p.add("tpm_limit", "must be from 0 (unlimited) to %d, got %d", int64(MaxCount), kk.GetTpmLimit())
	}
	if len(kk.GetAllowedModels()) > MaxAllowedModels {
		p.add("allowed_models", "must list at most %d models, got %d", MaxAllowedModels, len(kk.GetAllowedModels()))
	}
	for i, m := range kk.GetAllowedModels() {
		if err := CheckModelPattern(m); err != nil {
			p.add(fmt.Sprintf("allowed_models[%d]", i), "%v", err)
		}
	}
	if h := kk.GetPreviousKeyHash(); len(h) > 0 {
		if len(h) != sha256.Size {
			p.add("previous_key_hash", "must be %d bytes, got %d", sha256.Size, len(h))
		}
		if kk.GetPreviousExpiresAt() == nil {
			p.add("previous_expires_at", "required with previous_key_hash")
		}
	}
	return p.err()
}

// CheckQuotaLimit validates a quota's cost_limit (nil: unlimited) and returns it in micro-dollars: a
// non-negative plain decimal of at most pricing.MaxExactMicros micro-dollars (what admission compares
// exactly).
func CheckQuotaLimit(scope string, scopeID int64, limit *string) (int64, error) {
	p := &problems{resource: "quota", id: scopeID, name: scope}
	sc := vocab.Scope(scope)
	if sc != vocab.ScopeOrg && sc != vocab.ScopeTeam && sc != vocab.ScopeUser && sc != vocab.ScopeKey {
		p.add("scope", "unknown scope %q", scope)
	}
	p.checkID("scope_id", scopeID)
	var m int64
	if limit != nil {
		var err error
		if m, err = pricing.ParseMicros(*limit); err != nil {
			p.add("cost_limit", "%v", err)
		}
	}
	return m, p.err()
}
