package jsonkit

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
