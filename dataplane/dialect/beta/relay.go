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
