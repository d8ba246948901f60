package canon

import (
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// Want starts an optional object member: null sets *p nil and reports false; otherwise *p is allocated
// when nil, and the caller reads the member into it (merged into what a duplicate name set).
func Want[T any](d *jsonkit.Reader, p **T) (bool, error) {
	if d.Peek() == 'n' {
		*p = nil
		return false, d.Literal("null")
	}
	if *p == nil {
		*p = new(T)
	}
	return true, nil
}

// SliceResult is what a slice member holds after an array (empty, not nil) or null (nil).
func SliceResult[T any](out []T, null bool) []T {
	if null {
		return nil
	}
	if out == nil {
		return []T{}
	}
	return out
}
