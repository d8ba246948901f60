// Package routing owns candidate selection: it resolves the logical model name of a request to the
// ordered list of (provider, upstream model) candidates the data plane tries in turn — alias → route →
// enabled members by priority (lowest number first), weighted random order within one priority — or,
// when no route has that name, `provider_name/upstream_model` scoped addressing of one provider. It also
// decides whether an API key may use a model.
package routing

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate/tollgate/dataplane/httperr"
	"github.com/tollgate/tollgate/shared/snapshot"
)

// ErrUnknownModel is returned when no route, alias or scoped provider serves the model (→ 404).
var ErrUnknownModel = errors.New("unknown model")

// Candidate is one (provider, upstream model) to try.
type Candidate struct {
	Provider      *snapshot.Provider
	UpstreamModel string
}

// Selection is the resolved model of one request.
type Selection struct {
	// Route is the route the model named, or nil for scoped addressing.
	Route *snapshot.Route
	// Candidates are in the order to try them.
	Candidates []Candidate
}

// Selector picks candidates. The zero value is not usable; build one with New.
type Selector struct {
	intN func(n int) int
}

// New returns a Selector drawing weighted choices from intN (a uniform integer in [0, n)); nil uses
// math/rand/v2, which is safe for concurrent use. Tests inject a deterministic source.
func New(intN func(n int) int) *Selector {
	if intN == nil {
		intN = rand.IntN
	}
	return &Selector{intN: intN}
}

// Select resolves model against snap. Candidates are appended to dst[:0] (pass a reused or stack-backed
// slice to avoid allocating).
func (s *Selector) Select(snap *snapshot.Compiled, model string, dst []Candidate) (Selection, error) {
	dst = dst[:0]
	if r := snap.Route(model); r != nil {
		for _, g := range r.Groups {
			start := len(dst)
			for _, m := range g {
				dst = append(dst, Candidate{Provider: m.Provider, UpstreamModel: m.UpstreamModel})
			}
			s.shuffle(dst[start:], g)
		}
		return Selection{Route: r, Candidates: dst}, nil
	}
	name, upstream, ok := strings.Cut(model, "/")
	if !ok || name == "" || upstream == "" {
		return Selection{}, ErrUnknownModel
	}
	p := snap.ProviderByName(name)
	if p == nil || !p.Enabled {
		return Selection{}, ErrUnknownModel
	}
	return Selection{Candidates: append(dst, Candidate{Provider: p, UpstreamModel: upstream})}, nil
}

// shuffle orders c (built from group g, same order) as a weighted random permutation: each position takes
// one of the remaining members with probability proportional to its weight. Weights are carried in a
// parallel small array to avoid allocating for groups of up to 16 members.
func (s *Selector) shuffle(c []Candidate, g []snapshot.Member) {
	if len(c) < 2 {
		return
	}
	var buf [16]int32
	w := buf[:0]
	if len(g) > len(buf) {
		w = make([]int32, 0, len(g))
	}
	for _, m := range g {
		w = append(w, max(m.Weight, 1))
	}
	for i := 0; i < len(c)-1; i++ {
		total := 0
		for _, x := range w[i:] {
			total += int(x)
		}
		r := s.intN(total)
		j := i
		for ; j < len(c)-1; j++ {
			r -= int(w[j])
			if r < 0 {
				break
			}
		}
		c[i], c[j] = c[j], c[i]
		w[i], w[j] = w[j], w[i]
	}
}

// Permitted reports whether key may use model, the name the client sent. A key with allowed_models
// lists logical names or patterns (snapshot.MatchModel): the requested name, or — when it resolved to a
// route — the route's name or any of its aliases, so allowing a route allows its aliases and the other way
// round. Direct addressing (r nil: provider/model) also needs the key to have it
// (snapshot.APIKey.DirectAddressing: the gateway's switch, or the key's own allow_direct_addressing).
func Permitted(key *snapshot.APIKey, model string, r *snapshot.Route) bool {
	if r == nil && !key.DirectAddressing() {
		return false
	}
	if key.Allows(model) {
		return true
	}
	if r == nil {
		return false
	}
	if key.Allows(r.Name) {
		return true
	}
	for _, a := range r.Aliases {
		if key.Allows(a) {
			return true
		}
	}
	return false
}

// Priced applies the unpriced-model policy to the candidates of a billable request (docs/pricing.md,
// "Unpriced models"): a candidate without a price rule whose provider's policy is "deny"
// (snapshot.Provider.UnpricedDeny) is dropped, the others keep their order. It filters cands in place and
// returns the remaining ones; when every candidate is dropped it returns a 403 *httperr.Error
// (httperr.CodeModelUnpriced) that the proxy writes in the caller's dialect, before any upstream call. Under
// "allow" (the default) a candidate without a rule stays and is served at cost 0; its usage row has no
// price rule and is listed by the admin API's unpriced-model review.
//
// Call site (dataplane/proxy, after routing.Permitted): for a billable operation,
//
//	if sel.Candidates, err = routing.Priced(snap, c.model, sel.Candidates, c.start); err != nil { return err }
//
// at is the request's admission instant: the price rules in force then decide (a scheduled price change
// takes effect at its instant, docs/pricing.md).
func Priced(snap *snapshot.Compiled, model string, cands []Candidate, at time.Time) ([]Candidate, error) {
	kept := cands[:0]
	var denied *snapshot.Provider
	for _, c := range cands {
		if c.Provider.UnpricedDeny && snap.ResolvePriceAt(c.Provider.ID, c.UpstreamModel, at) == nil {
			denied = c.Provider
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) == 0 && denied != nil {
		return kept, &httperr.Error{Status: http.StatusForbidden, Code: httperr.CodeModelUnpriced, Param: "model",
			Message: fmt.Sprintf("the model %q has no price on provider %q, which refuses unpriced models", model, denied.Name)}
	}
	return kept, nil
}
