package canon

func Strp(s string) *string { return &s }

func HasToolCall(parts []Part) bool {
	for _, p := range parts {
		if p.Type == PartToolCall {
			return true
		}
	}
	return false
}
