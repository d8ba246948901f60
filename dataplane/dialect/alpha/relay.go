package alpha

import "github.com/tollgate/tollgate/dataplane/jsonkit"

// ReadChatRelay reads one event of a relayed chat completions stream in one pass (jsonkit.ReadRelay): the
// terminal "[DONE]", an error chunk (a top-level "error"), the usage chunk include_usage adds, and the
// usage and service_tier members usage accumulation takes.
func ReadChatRelay(data []byte, r *jsonkit.Relay) {
	if string(data) == "[DONE]" {
		*r = jsonkit.Relay{Terminal: true}
		return
	}
	jsonkit.ReadRelay(data, r)
	r.Failed = r.ErrorEvent("error", "response.failed")
	r.UsageChunk = !jsonkit.IsNull(r.FirstUsage) && jsonkit.EmptyArray(r.Choices)
	r.HasUsage = r.Usage != nil || r.Tier != nil
}

// ReadResponsesRelay reads one event of a relayed responses stream (or of an image stream, whose events
// are typed the same way) in one pass: terminal response.completed / response.incomplete, error events
// ("error", response.failed, or a top-level "error"), and whether usage accumulation reads it (the
// response object; an image event's top-level usage or service_tier).
func ReadResponsesRelay(data []byte, r *jsonkit.Relay) {
	jsonkit.ReadRelay(data, r)
	r.Failed = r.ErrorEvent("error", "response.failed")
	r.Terminal = r.TypeIn("response.completed", "response.incomplete")
	r.HasUsage = r.Response || r.Usage != nil || r.Tier != nil
}
