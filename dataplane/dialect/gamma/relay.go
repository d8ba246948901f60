package gamma

import (
	"bytes"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// ReadRelay reads one chunk of a relayed streamGenerateContent stream (an SSE event or a JSON-array
// element) in one pass (jsonkit.ReadRelay): an error chunk (a top-level "error") and the last chunk, the
// one whose candidates carry a finishReason (a JSON-array stream ends with its closing bracket instead), and
// whether usage accumulation reads it (a usageMetadata member).
func ReadRelay(data []byte, r *jsonkit.Relay) {
	jsonkit.ReadRelay(data, r)
	r.Failed = r.ErrorEvent("error")
	r.Terminal = r.Type == nil && bytes.Contains(data, finishReasonKey)
	r.HasUsage = r.UsageMetadata
}

var finishReasonKey = []byte(`"finishReason"`)
