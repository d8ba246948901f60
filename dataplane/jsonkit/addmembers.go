package jsonkit

import (
	"errors"
	"fmt"
)

// AppendWithMembers appends obj to dst with members (the text of one or more members, "k":v,…, without
// braces) added as the last members of the object found by following path from obj (each name a member
// of the object before it). It reports false, appending nothing, when a step is not an object (absent,
// null, repeated or another type) or members is empty. Every other byte of obj is kept.
func AppendWithMembers(dst, obj, members []byte, path ...string) ([]byte, bool) {
	if len(members) == 0 || len(obj) == 0 || obj[0] != '{' {
		return dst, false
	}
	cur := obj
	for _, name := range path {
		v, ok := Member(cur, name)
		if !ok || len(v) == 0 || v[0] != '{' {
			return dst, false
		}
		cur = v
	}
	// cur is a subslice of obj (Member returns views into its input): its offset is what the capacities say.
	start := cap(obj) - cap(cur)
	if start < 0 || start+len(cur) > len(obj) || &obj[start] != &cur[0] {
		return dst, false
	}
	closing := start + len(cur) - 1
	if obj[closing] != '}' {
		return dst, false
	}
	empty := true
	for i := closing - 1; i > start; i-- {
		if c := obj[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			empty = false
			break
		}
	}
	dst = append(dst, obj[:closing]...)
	if !empty {
		dst = append(dst, ',')
	}
	dst = append(dst, members...)
	return append(dst, obj[closing:]...), true
}

// SplitArrayElement splits one write of a JSON-array stream into the framing before its element (the
// opening bracket and/or the separator and white space) and the element; a write of framing only (the
// closing bracket) has no element.
func SplitArrayElement(p []byte) (framing, elem []byte) {
	i := 0
	for i < len(p) {
		switch p[i] {
		case '[', ',', ' ', '\t', '\r', '\n':
			i++
			continue
		}
		break
	}
	if i < len(p) && p[i] == ']' {
		return p, nil
	}
	return p[:i], p[i:]
}

// AppendArraySep appends the framing before element n (from 0) of a JSON-array stream written element by
// element: the opening bracket, then a separator (gamma's ",\r\n").
func AppendArraySep(dst []byte, n int) []byte {
	if n == 0 {
		return append(dst, '[')
	}
	return append(dst, ",\r\n"...)
}

// AppendArrayEnd appends the closing bracket of a JSON-array stream of n elements ("[]" for none).
func AppendArrayEnd(dst []byte, n int) []byte {
	if n == 0 {
		dst = append(dst, '[')
	}
	return append(dst, ']')
}

// AppendWithoutMember appends obj to dst without its top-level member name (and the comma that joined it),
// every other byte kept. It reports false, appending nothing, when obj is not an object, or the member is
// absent, repeated or spelled with escapes.
func AppendWithoutMember(dst, obj []byte, name string) ([]byte, bool) {
	v, ok := Member(obj, name)
	if !ok || v == nil || len(obj) == 0 || obj[0] != '{' {
		return dst, false
	}
	vs := cap(obj) - cap(v)
	if vs <= 0 || vs+len(v) > len(obj) || &obj[vs] != &v[0] {
		return dst, false
	}
	ve := vs + len(v)
	// back from the value over white space, the colon, white space, the quoted name
	i := vs - 1
	for i > 0 && isSpace(obj[i]) {
		i--
	}
	if obj[i] != ':' {
		return dst, false
	}
	i--
	for i > 0 && isSpace(obj[i]) {
		i--
	}
	ks := i - len(name) - 1 // the opening quote of the name
	if ks < 1 || obj[i] != '"' || obj[ks] != '"' || string(obj[ks+1:i]) != name {
		return dst, false
	}
	j := ks - 1
	for j > 0 && isSpace(obj[j]) {
		j--
	}
	if obj[j] == ',' {
		return append(append(dst, obj[:j]...), obj[ve:]...), true // ", "name": v" goes
	}
	// the first member: it goes with the comma after it, if any
	k := ve
	for k < len(obj) && isSpace(obj[k]) {
		k++
	}
	if k < len(obj) && obj[k] == ',' {
		k++
	}
	return append(append(dst, obj[:ks]...), obj[k:]...), true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// errPatch is what Patch reports for a body that is not one valid JSON object.
var errPatch = errors.New("the body is not one valid JSON object (with distinct member names)")

// Patch returns the JSON object obj with its top-level members named del removed and, when model is not
// empty, its "model" value replaced by model as a JSON string (added as the last member when absent).
// Every other byte is kept, so unknown members survive exactly. It refuses a body that is not one valid
// JSON object with distinct member names, or whose top-level names it cannot match exactly (a name spelled
// with escapes, or one of the edited names in another case).
func Patch(obj []byte, model string, del ...string) ([]byte, error) {
	obj = obj[skipSpace(obj, 0):]
	if !StartsObject(obj) || !validJSON(obj) {
		return nil, errPatch
	}
	out := obj
	for _, name := range del {
		v, ok := Member(out, name)
		if ok && v == nil {
			continue
		}
		if out, ok = AppendWithoutMember(nil, out, name); !ok {
			return nil, fmt.Errorf("cannot remove member %q: its name is ambiguous", name)
		}
	}
	if model == "" {
		return out, nil
	}
	v, ok := Member(out, "model")
	if !ok {
		return nil, errors.New(`cannot set member "model": its name is ambiguous`)
	}
	if v == nil {
		out, _ = AppendWithMembers(nil, out, AppendString([]byte(`"model":`), model))
		return out, nil
	}
	at := cap(out) - cap(v) // v is a view into out
	dst := make([]byte, 0, len(out)+len(model)+2)
	dst = append(dst, out[:at]...)
	dst = AppendString(dst, model)
	return append(dst, out[at+len(v):]...), nil
}
