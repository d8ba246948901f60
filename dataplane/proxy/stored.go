package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/dataplane/httperr"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/dataplane/routing"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// Stored resources (docs/dataplane.md "Stored resources"): a response or conversation lives at the
// provider that created it, so the ids the gateway hands out name that provider. An upstream id is
// rewritten on the way out by inserting "tg<provider id>." after its type prefix ("resp_abc" →
// "resp_tg3.abc"; an id without '_' gets the marker in front), and decoded on the way in to pick the
// provider and restore the upstream id. The encoding is reversible and needs no state; it is not secret:
// a request carrying an id is permitted only when the key may use its provider (mayReach), as for any
// request.

// idMarker starts the provider part of a gateway id.
const idMarker = "tg"

// encodeID returns the gateway id of upstream id for provider.
func encodeID(dst []byte, provider int64, id []byte) []byte {
	i := bytes.IndexByte(id, '_') + 1 // 0 without '_': the marker goes in front
	dst = append(dst, id[:i]...)
	dst = append(dst, idMarker...)
	dst = strconv.AppendInt(dst, provider, 10)
	dst = append(dst, '.')
	return append(dst, id[i:]...)
}

// decodeID returns the provider and upstream id of a gateway id; ok is false for an id the gateway did not
// hand out. The marker is right after the first '_' when the id has one, else at its start (encodeID's
// choice depends only on whether the upstream id has a '_', and the gateway id has one exactly then).
func decodeID(gid string) (provider int64, upstream string, ok bool) {
	i := strings.IndexByte(gid, '_') + 1
	rest, found := strings.CutPrefix(gid[i:], idMarker)
	if !found {
		return 0, "", false
	}
	digits, tail, found := strings.Cut(rest, ".")
	if !found || digits == "" || len(digits) > 18 || digits[0] == '0' || strings.Trim(digits, "0123456789") != "" {
		return 0, "", false
	}
	p, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || p <= 0 {
		return 0, "", false
	}
	return p, gid[:i] + tail, true
}

// storesIDs reports whether the answers of a class carry stored-resource ids the gateway rewrites: alpha
// responses (created, retrieved, deleted, cancelled) and conversations.
func storesIDs(class Class) bool {
	return (class.Kind == vocab.KindAlphaResponses && class.Op.IsGeneration()) || class.Op == vocab.OpCreateConversation
}

// storedObject reports whether a JSON object's "object" member names a stored resource whose top-level
// "id" is routed by (items inside conversations keep their ids: they are addressed under their
// conversation's id).
func storedObject(obj []byte) bool {
	v, _ := jsonkit.Member(obj, "object")
	return storedKind(v)
}

// storedKind reports whether the raw "object" value v names a stored resource.
func storedKind(v []byte) bool {
	switch s, _ := jsonkit.PlainString(v); string(s) {
	case "response", "response.deleted", "conversation", "conversation.deleted":
		return true
	}
	return false
}

// edit replaces body[start:end] by a string value's new contents.
type edit struct {
	start, end int
	id         []byte // the string's contents, without quotes
}

// idEdits appends the edits that rewrite a stored object's ids (its top-level "id" when it is a response
// or conversation, "previous_response_id", and "conversation" as a string or an object's "id"); off is
// the object's offset in the enclosing body. rewrite maps an id's contents to its replacement (nil to
// leave it). Members are read with jsonkit.Member: an object that repeats one, or spells it with escapes
// or in another case, is left as it is.
func idEdits(edits []edit, obj []byte, off int, rewrite func([]byte) []byte) []edit {
	str := func(v []byte) {
		if s, ok := jsonkit.PlainString(v); ok && len(s) > 0 {
			if id := rewrite(s); id != nil {
				at := off + cap(obj) - cap(s) // s is a view into obj
				edits = append(edits, edit{at, at + len(s), id})
			}
		}
	}
	if object, id, ok := jsonkit.Members2(obj, "object", "id"); ok && storedKind(object) {
		str(id)
	}
	prev, conv, ok := jsonkit.Members2(obj, "previous_response_id", "conversation")
	if !ok {
		return edits
	}
	str(prev)
	if jsonkit.StartsObject(conv) {
		conv, _ = jsonkit.Member(conv, "id")
	}
	str(conv)
	return edits
}

// applyEdits appends body with the edits applied (in any order; they do not overlap) to dst.
func applyEdits(dst, body []byte, edits []edit) []byte {
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	at := 0
	for _, e := range edits {
		dst = append(dst, body[at:e.start]...)
		dst = append(dst, e.id...)
		at = e.end
	}
	return append(dst, body[at:]...)
}

// encodeBodyIDs appends to dst a stored object's body (an answer) with its ids encoded for provider;
// changed is false when it carries none (dst then holds nothing new).
func encodeBodyIDs(dst, body []byte, provider int64) (out []byte, changed bool) {
	edits := idEdits(nil, body, 0, func(id []byte) []byte { return encodeID(nil, provider, id) })
	if len(edits) == 0 {
		return dst, false
	}
	return applyEdits(dst, body, edits), true
}

// encodeEventIDs rewrites an alpha responses stream event: the response object of the events that carry
// one (response.created, .in_progress, .completed, .incomplete, .failed, .queued).
func encodeEventIDs(data []byte, provider int64) ([]byte, bool) {
	if !bytes.Contains(data, []byte(`"response"`)) {
		return nil, false
	}
	resp, ok := jsonkit.Member(data, "response")
	if !ok || !jsonkit.StartsObject(resp) {
		return nil, false
	}
	edits := idEdits(nil, resp, cap(data)-cap(resp), func(id []byte) []byte { return encodeID(nil, provider, id) })
	if len(edits) == 0 {
		return nil, false
	}
	return applyEdits(nil, data, edits), true
}

// errForeignIDs refuses a request whose ids name two providers.
var errForeignIDs = errors.New("previous_response_id and conversation were created at different providers")

// decodeBodyIDs restores the upstream ids of a request body that refers to stored resources
// ("previous_response_id", "conversation") and returns the provider they were created at (0 when the body
// names no gateway id; body is then returned as is).
func decodeBodyIDs(body []byte) ([]byte, int64, error) {
	var pin int64
	var bad error
	edits := idEdits(nil, body, 0, func(id []byte) []byte {
		p, up, ok := decodeID(string(id))
		if !ok {
			return nil // not an id the gateway handed out: passed on as sent
		}
		if pin != 0 && p != pin {
			bad = errForeignIDs
		}
		pin = p
		return []byte(up)
	})
	if bad != nil {
		return nil, 0, bad
	}
	if len(edits) == 0 {
		return body, 0, nil
	}
	return applyEdits(make([]byte, 0, len(body)), body, edits), pin, nil
}

// mayReach reports whether key may send a request to provider p: a key without allowed_models may address
// any enabled provider (directly as "provider/model"); a key with allowed_models when one of its entries
// is a route with a member at p, or addresses p directly.
func mayReach(snap *snapshot.Compiled, key *snapshot.APIKey, p *snapshot.Provider) bool {
	if !p.Enabled {
		return false
	}
	if len(key.AllowedModels()) == 0 {
		return true
	}
	for _, m := range key.AllowedModels() {
		if r := snap.Route(m); r != nil {
			for _, g := range r.Groups {
				for _, mem := range g {
					if mem.Provider.ID == p.ID {
						return true
					}
				}
			}
			continue
		}
		if name, model, ok := strings.Cut(m, "/"); ok && model != "" && name == p.Name {
			return true
		}
	}
	return false
}

// errNotIssued answers an id the gateway did not hand out, or one naming a provider the key may not use
// (the same answer: a forged id learns nothing).
func errNotIssued(id string) *httperr.Error {
	return &httperr.Error{Status: http.StatusNotFound, Code: httperr.CodeNotFound,
		Message: fmt.Sprintf("no stored resource with id %q", id), Param: "id"}
}

// resolveStored routes a stored-resource request — /v1/responses/{id}[/cancel|/input_items],
// /v1/conversations/{id}[/items[/{item_id}]], or a conversation create that names no model — to its
// provider: the one named by the id, or for a conversation create the default provider (defaultStore).
// The provider's cell for the operation must be passthrough; c.usable gets that one candidate and
// c.storedPath the upstream path.
func (h *Handler) resolveStored(r *http.Request, c *call) error {
	var p *snapshot.Provider
	path := r.URL.EscapedPath()
	if c.class.NoModel {
		prefix := "/v1/responses/"
		if c.class.Op == vocab.OpCreateConversation {
			prefix = "/v1/conversations/"
		}
		rest, ok := strings.CutPrefix(path, prefix)
		if !ok {
			return httperr.NotFound(r.Method, r.URL.Path)
		}
		gid, tail, _ := strings.Cut(rest, "/")
		pid, up, ok := decodeID(gid)
		if !ok {
			return errNotIssued(gid)
		}
		if p = c.snap.Provider(pid); p == nil || !mayReach(c.snap, c.key, p) {
			return errNotIssued(gid)
		}
		c.storedPath = prefix + up
		if tail != "" {
			c.storedPath += "/" + tail
		}
	} else {
		if p = defaultStore(c.snap, c.key); p == nil {
			return httperr.Unsupported(c.class.Op, c.class.Kind, "no provider this key may use stores conversations")
		}
		c.storedPath = path
	}
	cell := p.Cell(c.class.Op, c.class.Kind)
	if cell.Impl != vocab.ImplPassthrough {
		return httperr.Unsupported(c.class.Op, c.class.Kind, "the provider holding this resource does not pass it through")
	}
	c.stored = true
	c.usable = append(c.usableA[:0], candidateCell{routing.Candidate{Provider: p}, cell})
	return nil
}

// defaultStore is the provider of a conversation created without a model: the first member, in priority
// order, of the first route (by name) the key may use whose provider passes conversations through.
func defaultStore(snap *snapshot.Compiled, key *snapshot.APIKey) *snapshot.Provider {
	for _, r := range snap.Routes() {
		if !routing.Permitted(key, r.Name, r) {
			continue
		}
		for _, g := range r.Groups {
			for _, m := range g {
				if m.Provider.Cell(vocab.OpCreateConversation, vocab.KindAlpha).Impl == vocab.ImplPassthrough {
					return m.Provider
				}
			}
		}
	}
	return nil
}
