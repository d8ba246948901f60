package proxy

import (
	"strconv"
	"time"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/dataplane/routing"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// gammaMethods are the gamma methods a model may advertise (supportedGenerationMethods), each with the
// cell that serves it.
var gammaMethods = [...]struct {
	name string
	op   vocab.Operation
	kind vocab.Kind
}{
	{"generateContent", vocab.OpGenerateContent, vocab.KindGammaGenerateContent},
	{"streamGenerateContent", vocab.OpStreamGenerateContent, vocab.KindGammaGenerateContent},
	{"countTokens", vocab.OpCountTokens, vocab.KindGamma},
	{"embedContent", vocab.OpCreateEmbedding, vocab.KindGamma},
}

// routeServes reports whether a member of route r has a provider whose cell serves class.
func (h *Handler) routeServes(r *snapshot.Route, class Class) bool {
	for _, g := range r.Groups {
		for _, m := range g {
			if h.servable(m.Provider.Cell(class.Op, class.Kind), class) {
				return true
			}
		}
	}
	return false
}

// gammaMethodSet returns the bit set of gammaMethods some member of r serves.
func (h *Handler) gammaMethodSet(r *snapshot.Route) uint8 {
	var set uint8
	for i, gm := range gammaMethods {
		if h.routeServes(r, Class{Op: gm.op, Kind: gm.kind, Stream: gm.op == vocab.OpStreamGenerateContent}) {
			set |= 1 << i
		}
	}
	return set
}

// listModels renders the models key may use (the name and aliases, that key is permitted to use, of every
// enabled route with a member whose provider has a cell serving list_models for kind — the routing cells
// decide, like for every other operation) in the shape of kind's dialect family; a gamma model advertises
// only the methods a member of its route serves. ok is false when no route may be listed for kind: the
// unsupported-operation error.
func (h *Handler) listModels(snap *snapshot.Compiled, key *snapshot.APIKey, kind vocab.Kind) (body []byte, ok bool) {
	var ids []string
	var sets []uint8
	class := Class{Op: vocab.OpListModels, Kind: kind}
	for _, r := range snap.Routes() {
		if len(r.Groups) == 0 || !h.routeServes(r, class) {
			continue
		}
		ok = true
		var set uint8
		if kind.Family() == vocab.KindGamma {
			set = h.gammaMethodSet(r)
		}
		for _, name := range append([]string{r.Name}, r.Aliases...) {
			if routing.Permitted(key, name, r) {
				ids, sets = append(ids, name), append(sets, set)
			}
		}
	}
	if !ok {
		return nil, false
	}
	created := snap.BuiltAt
	b := make([]byte, 0, 128+96*len(ids))
	switch kind.Family() {
	case vocab.KindBeta:
		b = append(b, `{"data":[`...)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendBetaModel(b, id, created)
		}
		b = append(b, `],"has_more":false,"first_id":`...)
		b = appendNullableID(b, ids, 0)
		b = append(b, `,"last_id":`...)
		b = appendNullableID(b, ids, len(ids)-1)
		b = append(b, '}')
	case vocab.KindGamma:
		b = append(b, `{"models":[`...)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendGammaModel(b, id, sets[i])
		}
		b = append(b, "]}"...)
	default:
		b = append(b, `{"object":"list","data":[`...)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendAlphaModel(b, id, created)
		}
		b = append(b, "]}"...)
	}
	return b, true
}

// getModel renders one model object of route r in the shape of kind's dialect family.
func (h *Handler) getModel(snap *snapshot.Compiled, r *snapshot.Route, id string, kind vocab.Kind) []byte {
	b := make([]byte, 0, 160)
	switch kind.Family() {
	case vocab.KindBeta:
		return appendBetaModel(b, id, snap.BuiltAt)
	case vocab.KindGamma:
		return appendGammaModel(b, id, h.gammaMethodSet(r))
	}
	return appendAlphaModel(b, id, snap.BuiltAt)
}

func appendNullableID(b []byte, ids []string, i int) []byte {
	if i < 0 || i >= len(ids) {
		return append(b, "null"...)
	}
	return jsonkit.AppendString(b, ids[i])
}

func appendAlphaModel(b []byte, id string, created time.Time) []byte {
	b = append(b, `{"id":`...)
	b = jsonkit.AppendString(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, created.Unix(), 10)
	return append(b, `,"owned_by":"tollgate"}`...)
}

func appendBetaModel(b []byte, id string, created time.Time) []byte {
	b = append(b, `{"type":"model","id":`...)
	b = jsonkit.AppendString(b, id)
	b = append(b, `,"display_name":`...)
	b = jsonkit.AppendString(b, id)
	b = append(b, `,"created_at":`...)
	b = jsonkit.AppendString(b, created.UTC().Format(time.RFC3339))
	return append(b, '}')
}

func appendGammaModel(b []byte, id string, methods uint8) []byte {
	b = append(b, `{"name":`...)
	b = jsonkit.AppendString(b, "models/"+id)
	b = append(b, `,"baseModelId":`...)
	b = jsonkit.AppendString(b, id)
	b = append(b, `,"version":"1","displayName":`...)
	b = jsonkit.AppendString(b, id)
	b = append(b, `,"supportedGenerationMethods":[`...)
	n := 0
	for i, gm := range gammaMethods {
		if methods&(1<<i) != 0 {
			if n > 0 {
				b = append(b, ',')
			}
			b = jsonkit.AppendString(b, gm.name)
			n++
		}
	}
	return append(b, "]}"...)
}
