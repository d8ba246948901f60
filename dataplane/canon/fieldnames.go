package canon

// Field is a request member that a destination may refuse; each client dialect spells it (Codec.FieldName).
type Field int

const (
	FieldStop       Field = iota // stop sequences
	FieldFormat                  // the response format (JSON mode)
	FieldToolResult              // a tool result's call id
)

// ClientField is field f as the client's dialect names it ("" before the client codec is known).
func (st *State) ClientField(f Field) string {
	if st.ClientCodec == nil {
		return ""
	}
	return st.ClientCodec.FieldName(f)
}
