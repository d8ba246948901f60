package beta

import "github.com/tollgate/tollgate/dataplane/jsonkit"

// ReadRelay reads one event of a relayed messages stream in one pass (jsonkit.ReadRelay): the terminal
// message_stop, the error event (type "error", or a top-level "error"), and whether usage accumulation
// reads it (a top-level usage, or message_start's message).
func ReadRelay(data []byte, r *jsonkit.Relay) {
	jsonkit.ReadRelay(data, r)
	r.Failed = r.ErrorEvent("error")
	r.Terminal = r.TypeIs("message_stop")
	r.HasUsage = r.Usage != nil || r.Message
}

// AppendOutputText appends the output text a relayed event carries, for local counting of a stream whose
// output the provider did not report (cut before message_delta): a content_block_delta's text, thinking or
// tool-input JSON fragment. Other events, and deltas it cannot read, append nothing.
func AppendOutputText(dst []byte, r *jsonkit.Relay) []byte {
	if !r.TypeIs("content_block_delta") {
		return dst
	}
	for _, name := range outputDeltaMembers {
		v, ok := jsonkit.Member(r.Delta, name)
		if !ok {
			return dst
		}
		if v != nil {
			dst, _ = jsonkit.AppendText(dst, v)
		}
	}
	return dst
}

// outputDeltaMembers are the members of a content_block_delta's delta that carry generated output.
var outputDeltaMembers = []string{"text", "thinking", "partial_json"}
