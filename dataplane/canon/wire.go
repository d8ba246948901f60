package canon

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// Own returns the request body the decoded canonical form may point into: the caller's own when it lent
// it (ClientRequest.Lent), else jsonkit.OwnedCopy of it.
func (st *State) Own(b []byte) []byte {
	if st.Lent {
		return b
	}
	return jsonkit.OwnedCopy(b)
}

// DataURL splits a `data:<mime>;base64,<data>` URL.
func DataURL(u string) (mime, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, d, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mime, isB64 := strings.CutSuffix(meta, ";base64")
	if !isB64 {
		return "", "", false
	}
	return mime, d, true
}

func MakeDataURL(mime, data string) string { return "data:" + mime + ";base64," + data }

// MimeFromURL guesses an image MIME type from a URL's extension (gamma fileData needs one).
func MimeFromURL(u string) string {
	p := strings.ToLower(u)
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	switch {
	case strings.HasSuffix(p, ".png"):
		return "image/png"
	case strings.HasSuffix(p, ".gif"):
		return "image/gif"
	case strings.HasSuffix(p, ".webp"):
		return "image/webp"
	case strings.HasSuffix(p, ".pdf"):
		return "application/pdf"
	}
	return "image/jpeg"
}

// SanitizeID maps an id to beta's allowed alphabet (letters, digits, '_' and '-').
func SanitizeID(id string) string {
	ok := true
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			ok = false
			break
		}
	}
	if ok {
		return id
	}
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// stripIDPrefix removes a known dialect id prefix so an upstream id can be re-prefixed in the client style.
func stripIDPrefix(id string) string {
	for _, p := range []string{"chatcmpl-", "resp_", "msg_"} {
		if s, ok := strings.CutPrefix(id, p); ok {
			return s
		}
	}
	return id
}

// ClientID synthesises an id in the client's style from the upstream id when there is one.
func ClientID(prefix, upstreamID string, st *State) string {
	s := SanitizeID(stripIDPrefix(upstreamID))
	if s == "" {
		s = st.RespSuffix()
	}
	return prefix + s
}

// TextOf joins the text parts.
// ResultText is a tool result's text as an alpha dialect carries it: the text of its parts, prefixed with
// "Error: " when the result reports an error and does not already say so (alpha has no error flag).
func ResultText(p *Part) string {
	text := TextOf(p.ResultParts)
	if p.IsError && !strings.HasPrefix(text, "Error") {
		text = "Error: " + text
	}
	return text
}

func TextOf(parts []Part) string {
	if len(parts) == 1 && parts[0].Type == PartText {
		return parts[0].Text // the usual case: no copy
	}
	var b strings.Builder
	for pi := range parts {
		p := &parts[pi]
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// RawText parses a JSON value that is a string or an array of {type,text} parts.
func RawText(r json.RawMessage) (string, bool) {
	if len(r) == 0 || string(r) == "null" {
		return "", true
	}
	var s string
	if jsonkit.StringOf(r, &s) {
		return s, true
	}
	var arr []textPartIn
	if d := (jsonkit.Reader{B: r}); d.Done(ReadTextParts(&d, &arr)) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range arr {
		b.WriteString(p.Text)
	}
	return b.String(), true
}

// StopList parses alpha's `stop` (string or array).
func StopList(r json.RawMessage) ([]string, error) {
	if len(r) == 0 || string(r) == "null" {
		return nil, nil
	}
	var s string
	if jsonkit.StringOf(r, &s) {
		return []string{s}, nil
	}
	var arr []string
	d := jsonkit.Reader{B: r}
	if err := d.Done(d.Strs(&arr)); err != nil {
		return nil, fmt.Errorf("stop: %w", err)
	}
	return arr, nil
}

func JSONHeader() http.Header { return http.Header{"Content-Type": []string{"application/json"}} }

// EffortBudget maps an alpha reasoning effort to a token budget (policy, documented in docs/translation.md).
func EffortBudget(effort string) int {
	switch effort {
	case "minimal":
		return 1024
	case "low":
		return 2048
	case "medium":
		return 8192
	case "high":
		return 16384
	case "xhigh", "max":
		return 32768
	}
	return 0
}

// BudgetEffort maps a token budget back to an alpha effort.
func BudgetEffort(b int) string {
	switch {
	case b <= 0:
		return ""
	case b <= 1024:
		return "minimal"
	case b <= 4096:
		return "low"
	case b <= 12288:
		return "medium"
	}
	return "high"
}

// CallNames maps call ids to function names over a conversation (gamma needs the name on results): the last
// call with an id names it. Up to len(small) calls are kept in place and searched from the last (cheaper
// than a map, and no allocation); more go into a map.
type CallNames struct {
	small [32]callName
	n     int
	m     map[string]string
}

type callName struct{ id, name string }

// ToolNames fills c from a conversation's tool calls.
func (c *CallNames) ToolNames(msgs []Message) {
	for i := range msgs {
		parts := msgs[i].Parts
		for j := range parts {
			if p := &parts[j]; p.Type == PartToolCall && p.CallID != "" {
				c.Add(p.CallID, p.Name)
			}
		}
	}
}

func (c *CallNames) Add(id, name string) {
	switch {
	case c.m != nil:
		c.m[id] = name
	case c.n < len(c.small):
		c.small[c.n] = callName{id, name}
		c.n++
	default:
		c.m = make(map[string]string, 2*len(c.small))
		for _, e := range c.small {
			c.m[e.id] = e.name
		}
		c.m[id] = name
	}
}

// Get is the name of the last call with id, "" for none (c may be nil: no calls).
func (c *CallNames) Get(id string) string {
	switch {
	case c == nil:
		return ""
	case c.m != nil:
		return c.m[id]
	}
	for i := c.n - 1; i >= 0; i-- {
		if c.small[i].id == id {
			return c.small[i].name
		}
	}
	return ""
}

// FieldPath names a request field in an error message (`messages[3].content[1]`). It is a value, built as
// the decoders descend and formatted only when an error is returned: a formatted name or a closure per
// message and part was most of a request's allocations.
type FieldPath struct {
	seg [6]string // names (".content"), each followed by its index when idx >= 0
	idx [6]int
	n   int
}

// PathOf starts a path: name, then [i] when i >= 0.
func PathOf(name string, i int) FieldPath { return FieldPath{}.With(name, i) }

// With extends the path with a name ("" for a bare index) and an index (-1 for none).
func (p FieldPath) With(name string, i int) FieldPath {
	if p.n < len(p.seg) {
		p.seg[p.n], p.idx[p.n] = name, i
		p.n++
	}
	return p
}

func (p FieldPath) String() string {
	var b strings.Builder
	for k := 0; k < p.n; k++ {
		b.WriteString(p.seg[k])
		if p.idx[k] >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(p.idx[k]))
			b.WriteByte(']')
		}
	}
	return b.String()
}
