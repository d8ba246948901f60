package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate/tollgate/controlplane/store"
	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// ModelPolicy is the gateway-wide model policy with the providers that have their own unpriced policy
// (docs/pricing.md, "Unpriced models").
type ModelPolicy struct {
	UnpricedPolicy   string                 `json:"unpriced_policy"`
	DirectAddressing bool                   `json:"direct_addressing"`
	Providers        []store.ProviderPolicy `json:"providers"`
}

// ModelPolicyInput sets the gateway-wide policy; absent fields keep their value.
type ModelPolicyInput struct {
	UnpricedPolicy   *string `json:"unpriced_policy"`
	DirectAddressing *bool   `json:"direct_addressing"`
}

// GetModelPolicy reads the model policy.
func (s *Service) GetModelPolicy(ctx context.Context) (ModelPolicy, error) {
	var out ModelPolicy
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		mp, err := store.GetModelPolicy(ctx, tx)
		if err != nil {
			return err
		}
		out.UnpricedPolicy, out.DirectAddressing = mp.GetUnpricedPolicy(), mp.GetDirectAddressing()
		out.Providers, err = store.ListProviderPolicies(ctx, tx)
		return err
	})
	return out, storeError(err, "model policy")
}

// SetModelPolicy changes the gateway-wide policy; the next snapshot carries it.
func (s *Service) SetModelPolicy(ctx context.Context, in ModelPolicyInput) (ModelPolicy, error) {
	if in.UnpricedPolicy != nil {
		if err := snapshot.CheckUnpricedPolicy(*in.UnpricedPolicy); err != nil || *in.UnpricedPolicy == "" {
			return ModelPolicy{}, invalidFields("invalid model policy", field("unpriced_policy", `must be "allow" or "deny", got %q`, *in.UnpricedPolicy))
		}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		mp, err := store.GetModelPolicy(ctx, tx)
		if err != nil {
			return err
		}
		if in.UnpricedPolicy != nil {
			mp.UnpricedPolicy = *in.UnpricedPolicy
		}
		if in.DirectAddressing != nil {
			mp.DirectAddressing = *in.DirectAddressing
		}
		return store.SetModelPolicy(ctx, tx, mp)
	})
	if err != nil {
		return ModelPolicy{}, storeError(err, "model policy")
	}
	return s.GetModelPolicy(ctx)
}

// SetProviderUnpricedPolicy sets a provider's own unpriced policy ("allow" or "deny"); nil makes it
// follow the gateway default.
func (s *Service) SetProviderUnpricedPolicy(ctx context.Context, providerID int64, policy *string) error {
	if err := checkID(providerID, "provider id"); err != nil {
		return err
	}
	if policy != nil {
		if err := snapshot.CheckUnpricedPolicy(*policy); err != nil || *policy == "" {
			return invalidFields("invalid unpriced policy", field("unpriced_policy", `must be "allow", "deny" or null, got %q`, *policy))
		}
	}
	return storeError(s.inTx(ctx, func(tx pgx.Tx) error { return store.SetProviderUnpricedPolicy(ctx, tx, providerID, policy) }),
		fmt.Sprintf("provider %d", providerID))
}

// ListUnpricedModels lists the (provider, upstream model) pairs served without a price rule since since
// (zero: the last 30 days), for review.
func (s *Service) ListUnpricedModels(ctx context.Context, since time.Time) ([]store.UnpricedModel, error) {
	if since.IsZero() {
		since = time.Now().Add(-30 * 24 * time.Hour)
	}
	ms, err := store.ListUnpricedModels(ctx, s.pool, since)
	return ms, storeError(err, "unpriced models")
}

func modelPolicyToProto(p ModelPolicy) *configv1.ModelPolicy {
	return &configv1.ModelPolicy{UnpricedPolicy: p.UnpricedPolicy, DirectAddressing: p.DirectAddressing}
}
