package beta

import "github.com/tollgate/tollgate/dataplane/jsonkit"

// ReadRelay reads one event of a relayed messages stream in one pass (jsonkit.ReadRelay): the terminal
// message_stop and the error event (type "error", or a top-level "error").
func ReadRelay(data []byte, r *jsonkit.Relay) {
	jsonkit.ReadRelay(data, r)
	r.Failed = r.ErrorEvent("error")
	r.Terminal = r.TypeIs("message_stop")
}
