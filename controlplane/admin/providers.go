package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/shared/cloud"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// ProviderInput is a provider as written by a client. enabled defaults to true.
type ProviderInput struct {
	ID          int64           `json:"id"`
	Name        string          `json:"name"`
	ChannelType string          `json:"channel_type"`
	BaseURL     string          `json:"base_url"`
	Enabled     *bool           `json:"enabled"`
	Settings    json.RawMessage `json:"settings"`
}

func (in ProviderInput) validate() (store.Provider, error) {
	details := idDetails("id", in.ID)
	settings := bytes.TrimSpace(in.Settings)
	checked := settings
	var obj map[string]json.RawMessage // the library decides what a JSON object is
	if len(settings) == 0 || bytes.Equal(settings, []byte("null")) {
		settings, checked = []byte("{}"), []byte("{}")
	} else if json.Unmarshal(settings, &obj) != nil || obj == nil {
		details = append(details, field("settings", "must be a JSON object"))
		checked = []byte("{}") // reported once, here
	}
	// A cloud channel's typed settings (shared/cloud); an empty base_url takes the regional endpoint
	// they name.
	ch := vocab.ChannelType(in.ChannelType)
	baseURL := in.BaseURL
	if ch.Cloud() && string(checked) == string(settings) {
		details = append(details, cloudDetails(cloud.CheckSettings(ch, settings))...)
		if baseURL == "" {
			baseURL = cloud.DefaultBaseURL(ch, settings)
		}
	}
	// The snapshot compiler's checks: name (non-empty, no '/'), channel_type, base_url, settings.
	for _, d := range checkProviderMessage(in.ID, in.Name, in.ChannelType, baseURL, checked, in.Enabled == nil || *in.Enabled) {
		if d.Field == "base_url" && baseURL == "" && ch.Cloud() {
			if ch != vocab.ChannelAzureOpenAI {
				continue // derived from the settings, whose problems are reported
			}
			d.Message = "required: the Azure OpenAI resource endpoint, e.g. https://my-resource.openai.azure.com"
		}
		details = append(details, d)
	}
	if details != nil {
		return store.Provider{}, invalidFields("invalid provider", details...)
	}
	return store.Provider{ID: in.ID, Name: in.Name, ChannelType: in.ChannelType, BaseURL: baseURL,
		Enabled: in.Enabled == nil || *in.Enabled, Settings: settings}, nil
}

// inTx runs fn in one transaction. It is the one place that names the caller of ctx (its admin
// token's role and name) as the writer of the transaction's changes, which the price-history triggers
// record (store.SetActor); a ctx with no caller leaves the database role recorded.
func (s *Service) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	p, ok, err := s.caller(ctx)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if ok {
			if err := store.SetActor(ctx, tx, p.Actor()); err != nil {
				return err
			}
		}
		return fn(tx)
	})
}

// ListProviders lists providers (with credentials, never secrets) in id order.
func (s *Service) ListProviders(ctx context.Context, limit int, cursor string) (Page[store.Provider], error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return Page[store.Provider]{}, err
	}
	after, err := decodeCursor(cursor)
	if err != nil {
		return Page[store.Provider]{}, err
	}
	ps, err := store.ListProviders(ctx, s.pool, after, limit)
	if err != nil {
		return Page[store.Provider]{}, storeError(err, "providers")
	}
	return page(ps, limit, func(p store.Provider) int64 { return p.ID }), nil
}

// GetProvider reads one provider.
func (s *Service) GetProvider(ctx context.Context, id int64) (store.Provider, error) {
	if err := checkID(id, "id"); err != nil {
		return store.Provider{}, err
	}
	p, err := store.GetProvider(ctx, s.pool, id)
	return p, storeError(err, fmt.Sprintf("provider %d", id))
}

// CreateProvider creates a provider and, in the same transaction, seeds its channel's declared
// default routing cells. A given id is refused: provider ids are always assigned.
func (s *Service) CreateProvider(ctx context.Context, in ProviderInput) (store.Provider, error) {
	if in.ID != 0 {
		return store.Provider{}, invalidFields("invalid provider", field("id", "is assigned by the server; use PUT /admin/providers/{id} to change a provider"))
	}
	row, err := in.validate()
	if err != nil {
		return store.Provider{}, err
	}
	var out store.Provider
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		p, err := store.InsertProvider(ctx, tx, row)
		if err != nil {
			return err
		}
		if err := store.ResetRoutingRules(ctx, tx, p.ID, defaultRows(p.ID, vocab.ChannelType(p.ChannelType))); err != nil {
			return err
		}
		out = p
		return nil
	})
	return out, storeError(err, "provider")
}

// UpdateProvider replaces provider id. Changing channel_type does not touch routing rules; reset
// them to apply the new channel's defaults.
func (s *Service) UpdateProvider(ctx context.Context, id int64, in ProviderInput) (store.Provider, error) {
	if err := checkID(id, "id"); err != nil {
		return store.Provider{}, err
	}
	if in.ID != 0 && in.ID != id {
		return store.Provider{}, invalidFields("invalid provider", field("id", "body id %d does not match path id %d", in.ID, id))
	}
	in.ID = id
	row, err := in.validate()
	if err != nil {
		return store.Provider{}, err
	}
	var p store.Provider
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		p, err = store.UpdateProvider(ctx, tx, row)
		if err != nil {
			return err
		}
		return s.checkCredentials(ctx, tx, p)
	})
	return p, storeError(err, fmt.Sprintf("provider %d", id))
}

// checkCredentials refuses a cloud provider's new channel type or settings when a stored credential
// does not fit them (another auth mode's secret, say): the operator adds fitting credentials and
// deletes the others first, so a provider never holds credentials its data planes cannot use.
func (s *Service) checkCredentials(ctx context.Context, tx pgx.Tx, p store.Provider) error {
	ch := vocab.ChannelType(p.ChannelType)
	if !ch.Cloud() {
		return nil
	}
	var details []Detail
	for i, c := range p.Credentials {
		sealed, err := store.CredentialCiphertext(ctx, tx, c.ID)
		if err != nil {
			return err
		}
		secret, err := s.box.Open(sealed)
		if err != nil {
			return fmt.Errorf("open credential %d: %w", c.ID, err)
		}
		if err := cloud.CheckSecret(ch, p.Settings, string(secret)); err != nil {
			details = append(details, Detail{Section: "credentials", Index: intp(i), Resource: "credential", ID: c.ID,
				Message: fmt.Sprintf("credential %d does not fit the new settings: %v; add a fitting credential and delete this one first", c.ID, err)})
		}
	}
	if details != nil {
		return invalidFields(fmt.Sprintf("provider %d has credentials its new settings cannot use", p.ID), details...)
	}
	return nil
}

// DeleteProvider deletes a provider with its credentials and routing rules. It is refused with
// CodeInUse, listing them, while routes or price rules reference the provider.
func (s *Service) DeleteProvider(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	what := fmt.Sprintf("provider %d", id)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := store.LockProvider(ctx, tx, id); err != nil {
			return err
		}
		routes, err := store.RoutesUsingProvider(ctx, tx, id)
		if err != nil {
			return err
		}
		rules, err := store.PriceRulesUsingProvider(ctx, tx, id)
		if err != nil {
			return err
		}
		if len(routes) > 0 || len(rules) > 0 {
			e := errorf(CodeInUse, "%s is still referenced by %d route(s) and %d price rule(s); remove those references first",
				what, len(routes), len(rules))
			for _, r := range routes {
				e.Details = append(e.Details, Detail{Resource: "route", ID: r.ID, Name: r.Name,
					Message: fmt.Sprintf("route %d (%s) has a member on %s", r.ID, r.Name, what)})
			}
			for _, rid := range rules {
				e.Details = append(e.Details, Detail{Resource: "price_rule", ID: rid,
					Message: fmt.Sprintf("price rule %d is scoped to %s", rid, what)})
			}
			return e
		}
		return store.DeleteProvider(ctx, tx, id)
	})
	if errors.Is(err, store.ErrReference) {
		// A route gained a member between the check and the delete.
		return &Error{Code: CodeInUse, Message: what + " is still referenced", Cause: err}
	}
	return storeError(err, what)
}

// CredentialInput is a credential as written: the secret is write-only. weight defaults to 1 and
// enabled to true.
type CredentialInput struct {
	ProviderID int64  `json:"provider_id"`
	Secret     string `json:"secret"`
	Weight     *int32 `json:"weight"`
	Enabled    *bool  `json:"enabled"`
}

// CreateCredential seals the secret (AES-GCM) and stores the credential for in.ProviderID.
func (s *Service) CreateCredential(ctx context.Context, in CredentialInput) (store.CredentialInfo, error) {
	if err := checkID(in.ProviderID, "provider_id"); err != nil {
		return store.CredentialInfo{}, err
	}
	var details []Detail
	if in.Secret == "" {
		details = append(details, field("secret", "required"))
	}
	weight := int32(1)
	if in.Weight != nil {
		weight = *in.Weight
		if weight <= 0 {
			details = append(details, field("weight", "must be positive, got %d", weight))
		}
	}
	if details != nil {
		return store.CredentialInfo{}, invalidFields("invalid credential", details...)
	}
	sealed, err := s.box.Seal([]byte(in.Secret))
	if err != nil {
		return store.CredentialInfo{}, fmt.Errorf("seal credential: %w", err)
	}
	var out store.CredentialInfo
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := store.LockProvider(ctx, tx, in.ProviderID); err != nil {
			return err
		}
		p, err := store.GetProvider(ctx, tx, in.ProviderID)
		if err != nil {
			return err
		}
		// A cloud credential's secret has the shape its provider's auth mode takes (docs/providers.md).
		if ds := cloudDetails(cloud.CheckSecret(vocab.ChannelType(p.ChannelType), p.Settings, in.Secret)); ds != nil {
			return invalidFields(fmt.Sprintf("invalid credential for %s provider %d", p.ChannelType, p.ID), ds...)
		}
		out, err = store.InsertCredential(ctx, tx, in.ProviderID, sealed, weight, in.Enabled == nil || *in.Enabled)
		return err
	})
	return out, storeError(err, fmt.Sprintf("provider %d", in.ProviderID))
}

// DeleteCredential deletes a credential.
func (s *Service) DeleteCredential(ctx context.Context, id int64) error {
	if err := checkID(id, "id"); err != nil {
		return err
	}
	return storeError(s.inTx(ctx, func(tx pgx.Tx) error { return store.DeleteCredential(ctx, tx, id) }),
		fmt.Sprintf("credential %d", id))
}

// RoutingRuleInput is a routing cell as written. id set: replace that row of the provider; id
// absent: insert a new row (a duplicate (operation, kind) is a conflict). enabled defaults to true.
type RoutingRuleInput struct {
	ID             int64   `json:"id"`
	ProviderID     int64   `json:"provider_id"`
	Operation      string  `json:"operation"`
	Kind           string  `json:"kind"`
	Implementation string  `json:"implementation"`
	DestOperation  *string `json:"dest_operation"`
	DestKind       *string `json:"dest_kind"`
	SortOrder      int32   `json:"sort_order"`
	Enabled        *bool   `json:"enabled"`
}

// validate checks the vocabulary and the spec's kind constraint. A transform_to row without
// dest_kind is accepted (it compiles as unsupported, spec constraint 2).
func (in RoutingRuleInput) validate() (store.RoutingRule, []Detail) {
	details := idDetails("id", in.ID)
	if in.ProviderID <= 0 {
		details = append(details, field("provider_id", "must be a positive provider id, got %d", in.ProviderID))
	}
	op := vocab.Operation(in.Operation)
	details = append(details, cellDetails(in.Operation, in.Kind)...)
	if !vocab.Implementation(in.Implementation).Valid() {
		details = append(details, field("implementation", `must be "passthrough", "transform_to", "local" or "unsupported", got %q`, in.Implementation))
	}
	destOp := op
	if in.DestOperation != nil {
		destOp = vocab.Operation(*in.DestOperation)
		if !destOp.Valid() {
			details = append(details, field("dest_operation", "unknown operation %q", *in.DestOperation))
		}
	}
	if in.DestKind != nil {
		dk := vocab.Kind(*in.DestKind)
		if !dk.IsGeneration() && !dk.IsFamily() {
			details = append(details, field("dest_kind", "unknown kind %q", *in.DestKind))
		} else if destOp.Valid() && !vocab.KindFits(destOp, dk) {
			details = append(details, field("dest_kind", "kind %q does not fit destination operation %s", *in.DestKind, destOp))
		}
	}
	if details == nil {
		// The snapshot compiler's own check of the row.
		m := &configv1.RoutingRule{Id: orServerID(in.ID), ProviderId: in.ProviderID, Operation: in.Operation, Kind: in.Kind,
			Implementation: in.Implementation, DestOperation: in.DestOperation, DestKind: in.DestKind, SortOrder: in.SortOrder, Enabled: true}
		if _, err := snapshot.CheckRoutingRule(m); err != nil {
			details = elementDetails(err)
		}
	}
	if details != nil {
		return store.RoutingRule{}, details
	}
	return store.RoutingRule{ID: in.ID, ProviderID: in.ProviderID, Operation: in.Operation, Kind: in.Kind,
		Implementation: in.Implementation, DestOperation: in.DestOperation, DestKind: in.DestKind,
		SortOrder: in.SortOrder, Enabled: in.Enabled == nil || *in.Enabled}, nil
}

// ListRoutingRules lists a provider's routing rules (404 for an unknown provider).
func (s *Service) ListRoutingRules(ctx context.Context, providerID int64) ([]store.RoutingRule, error) {
	if err := checkID(providerID, "provider_id"); err != nil {
		return nil, err
	}
	var out []store.RoutingRule
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := store.GetProvider(ctx, tx, providerID); err != nil {
			return err
		}
		var err error
		out, err = store.ListRoutingRules(ctx, tx, providerID)
		return err
	})
	return out, storeError(err, fmt.Sprintf("provider %d", providerID))
}

// UpsertRoutingRules writes cells of one provider in one transaction: rows with an id replace that
// row, rows without one are inserted. Every row is validated first; any problem, or a duplicate
// (provider_id, operation, kind) reported by the store's constraint, changes nothing. It returns
// the provider's rows afterwards.
func (s *Service) UpsertRoutingRules(ctx context.Context, providerID int64, in []RoutingRuleInput) ([]store.RoutingRule, error) {
	if err := checkID(providerID, "provider_id"); err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return nil, invalidFields("no routing rules given", field("rules", "must hold at least one routing rule"))
	}
	rows := make([]store.RoutingRule, len(in))
	var details []Detail
	for i, r := range in {
		if r.ProviderID == 0 {
			r.ProviderID = providerID
		}
		if r.ProviderID != providerID {
			details = append(details, Detail{Section: "rules", Index: intp(i), Field: "provider_id",
				Message: fmt.Sprintf("must be %d (the provider in the path) or omitted, got %d", providerID, r.ProviderID)})
			continue
		}
		row, ds := r.validate()
		for _, d := range ds {
			d.Section, d.Index = "rules", intp(i)
			details = append(details, d)
		}
		rows[i] = row
	}
	if details != nil {
		return nil, invalidFields("invalid routing rules", details...)
	}
	var out []store.RoutingRule
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := store.LockProvider(ctx, tx, providerID); err != nil {
			return err
		}
		for i, r := range rows {
			var err error
			if r.ID != 0 {
				_, err = store.UpdateRoutingRule(ctx, tx, r)
			} else {
				_, err = store.InsertRoutingRule(ctx, tx, r)
			}
			if errors.Is(err, store.ErrNotFound) {
				return &Error{Code: CodeNotFound, Message: fmt.Sprintf("routing rule %d not found on provider %d", r.ID, providerID),
					Details: []Detail{{Section: "rules", Index: intp(i), Field: "id", Message: "no such routing rule on this provider"}}, Cause: err}
			}
			if errors.Is(err, store.ErrConflict) {
				return &Error{Code: CodeConflict, Message: fmt.Sprintf("provider %d already has a routing rule for (%s, %s)", providerID, r.Operation, r.Kind),
					Details: []Detail{{Section: "rules", Index: intp(i), Field: "kind", Message: "duplicate (provider_id, operation, kind)"}}, Cause: err}
			}
			if err != nil {
				return err
			}
		}
		var err error
		out, err = store.ListRoutingRules(ctx, tx, providerID)
		return err
	})
	return out, storeError(err, fmt.Sprintf("provider %d", providerID))
}

// ResetRoutingRules restores the provider's channel's declared default cells: each declared
// (operation, kind) row gets the default implementation, dest_operation, dest_kind, sort_order and
// enabled = true (inserted when missing); every other row is left as it is. It returns all rows.
func (s *Service) ResetRoutingRules(ctx context.Context, providerID int64) ([]store.RoutingRule, error) {
	if err := checkID(providerID, "provider_id"); err != nil {
		return nil, err
	}
	var out []store.RoutingRule
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		ch, err := store.LockProvider(ctx, tx, providerID)
		if err != nil {
			return err
		}
		if err := store.ResetRoutingRules(ctx, tx, providerID, defaultRows(providerID, vocab.ChannelType(ch))); err != nil {
			return err
		}
		out, err = store.ListRoutingRules(ctx, tx, providerID)
		return err
	})
	return out, storeError(err, fmt.Sprintf("provider %d", providerID))
}

// DeleteRoutingRule deletes one routing cell of a provider, named by its operation and kind. An
// unknown operation or kind name, or a kind that cannot go with the operation (no such cell can
// exist), is CodeInvalid naming it; an unknown provider or a cell the provider does not have is
// CodeNotFound. Afterwards the cell is absent, which the data plane treats as unsupported; reset
// restores a declared default.
func (s *Service) DeleteRoutingRule(ctx context.Context, providerID int64, operation, kind string) error {
	if err := checkID(providerID, "provider_id"); err != nil {
		return err
	}
	if err := checkCell(operation, kind); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := store.LockProvider(ctx, tx, providerID); err != nil {
			return err
		}
		err := store.DeleteRoutingRule(ctx, tx, providerID, operation, kind)
		if errors.Is(err, store.ErrNotFound) {
			return &Error{Code: CodeNotFound, Message: fmt.Sprintf("provider %d has no routing rule for (%s, %s)", providerID, operation, kind),
				Cause: err}
		}
		return err
	})
	return storeError(err, fmt.Sprintf("provider %d", providerID))
}

// checkCell checks the (operation, kind) that names a routing cell in a request path (CodeInvalid,
// not a body's CodeValidation).
func checkCell(operation, kind string) error {
	if details := cellDetails(operation, kind); details != nil {
		return &Error{Code: CodeInvalid, Message: fmt.Sprintf("invalid routing cell (%q, %q)", operation, kind), Details: details}
	}
	return nil
}

// cellDetails checks a routing cell's key, for writes and for paths alike: operation and kind must be
// vocabulary names and the kind must fit the operation (spec: generation operations take a
// content-generation kind, every other operation a provider-family kind).
func cellDetails(operation, kind string) []Detail {
	op, k := vocab.Operation(operation), vocab.Kind(kind)
	var details []Detail
	if !op.Valid() {
		details = append(details, field("operation", "unknown operation %q; want one of %v", operation, vocab.Operations))
	}
	if !k.IsGeneration() && !k.IsFamily() {
		details = append(details, field("kind", "unknown kind %q; want one of %v or %v", kind, vocab.GenerationKinds, vocab.FamilyKinds))
	} else if op.Valid() && !vocab.KindFits(op, k) {
		if op.IsGeneration() {
			details = append(details, field("kind", "operation %s needs a content-generation kind %v, got %q", op, vocab.GenerationKinds, kind))
		} else {
			details = append(details, field("kind", "operation %s needs a provider-family kind %v, got %q", op, vocab.FamilyKinds, kind))
		}
	}
	return details
}

// cloudDetails turns shared/cloud's problems into field details.
func cloudDetails(err error) []Detail {
	if err == nil {
		return nil
	}
	var ps cloud.Problems
	if !errors.As(err, &ps) {
		return []Detail{field("settings", "%v", err)}
	}
	out := make([]Detail, len(ps))
	for i, p := range ps {
		out[i] = field(p.Field, "%s", p.Message)
	}
	return out
}
