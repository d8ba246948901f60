package canon

// Clipped is s[start:] with its capacity clipped, so an append to it copies instead of overwriting what
// follows in the shared backing array.
func Clipped(s []Part, start int) []Part { return s[start:len(s):len(s)] }

func NonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
