package jsonkit

// Relay is what one pass over the top-level members of a relayed (passthrough) stream event finds: the raw
// values the dialects' relay readers decide the event by. First holds the first occurrence of each name
// (what terminal, error and usage-chunk detection look at), Usage and Tier the last occurrence of "usage"
// and "service_tier" (what usage accumulation takes, as the general decoder keeps the last duplicate).
// Whole says the scan reached the object's end with a sound structure and nothing after it; the values
// found before a structural error are kept.
type Relay struct {
	Type, Error, Choices, Delta []byte // first occurrences
	FirstUsage                  []byte
	Usage, Tier                 []byte // last occurrences
	Whole                       bool
	// Members some dialect's usage sits in (beta message_start's message, alpha responses' response,
	// gamma's usageMetadata): present or not, and the last occurrence of each (what the dialect's usage
	// billing reads).
	Message, Response, UsageMetadata                bool
	MessageValue, ResponseValue, UsageMetadataValue []byte

	// Set by the dialect's relay reader from the members above.
	Terminal   bool // the dialect's terminal event: the client has the whole answer
	Failed     bool // the dialect's in-stream error event
	UsageChunk bool // alpha chat's usage chunk (stream_options.include_usage): empty choices, usage not null
	// HasUsage says the event has a member the dialect's usage billing reads: an event without one
	// leaves the billing unchanged and is not handed to it.
	HasUsage bool
}

// ReadRelay scans the top-level members of data once into r. Values are not validated (a value that is
// used is decoded by its reader); names are compared with their raw text, so an escaped name matches none.
func ReadRelay(data []byte, r *Relay) {
	*r = Relay{}
	closing, err := walkMembers(data, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			if r.Type == nil {
				r.Type = v
			}
		case "error":
			if r.Error == nil {
				r.Error = v
			}
		case "choices":
			if r.Choices == nil {
				r.Choices = v
			}
		case "delta":
			if r.Delta == nil {
				r.Delta = v
			}
		case "usage":
			if r.FirstUsage == nil {
				r.FirstUsage = v
			}
			r.Usage = v
		case "service_tier":
			r.Tier = v
		case "message":
			r.Message, r.MessageValue = true, v
		case "response":
			r.Response, r.ResponseValue = true, v
		case "usageMetadata":
			r.UsageMetadata, r.UsageMetadataValue = true, v
		}
		return true
	})
	r.Whole = err == nil && skipSpace(data, closing+1) == len(data)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// TypeIs reports whether the first "type" member is the string s (written without escapes; s has none, so
// the raw value is s quoted exactly when PlainString would read s from it).
func (r *Relay) TypeIs(s string) bool {
	t := r.Type
	return len(t) == len(s)+2 && t[0] == '"' && t[len(t)-1] == '"' && string(t[1:len(t)-1]) == s
}

// ErrorEvent reports whether the event is an error event: its first "error" member is not null, or it has
// none and its type is one of types.
func (r *Relay) ErrorEvent(types ...string) bool {
	if r.Error != nil {
		return string(r.Error) != "null"
	}
	for _, t := range types {
		if r.TypeIs(t) {
			return true
		}
	}
	return false
}

// TypeIn reports whether the event's first "type" member is one of types.
func (r *Relay) TypeIn(types ...string) bool {
	for _, t := range types {
		if r.TypeIs(t) {
			return true
		}
	}
	return false
}

// EmptyArray reports whether a raw value is an array without elements.
func EmptyArray(v []byte) bool {
	if len(v) < 2 || v[0] != '[' {
		return false
	}
	return skipSpace(v, 1) == len(v)-1
}
