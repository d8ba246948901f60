package batch

import (
	"encoding/json"

	"github.com/tollgate/tollgate/controlplane/store"
	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// lineKind is the (inbound kind, operation) a batch's lines are recorded as: what one of its requests would
// have been through the gateway.
func lineKind(b store.Batch) (vocab.Kind, vocab.Operation) {
	switch b.Dialect {
	case "beta":
		return vocab.KindBetaMessages, vocab.OpGenerateContent
	case "gamma":
		return vocab.KindGammaGenerateContent, vocab.OpGenerateContent
	}
	switch b.Endpoint {
	case "/v1/responses":
		return vocab.KindAlphaResponses, vocab.OpGenerateContent
	case "/v1/embeddings":
		return vocab.KindAlpha, vocab.OpCreateEmbedding
	}
	return vocab.KindAlphaChatCompletions, vocab.OpGenerateContent
}

// usageAndModel is a line's billed usage and the model its body names.
type usageAndModel struct {
	usage.Usage
	found bool
	model string
}

// bill extracts a line body's usage with the data plane's own body billing (the functions that bill the
// same answer when it comes back from a single request): beta.BillBody, alpha.BillBody (chat completions,
// responses, embeddings), gamma.BillBody.
func bill(b store.Batch, body []byte) (usageAndModel, error) {
	var out usageAndModel
	var err error
	kind, op := lineKind(b)
	switch kind {
	case vocab.KindBetaMessages:
		out.Usage, out.found, err = beta.BillBody(body)
	case vocab.KindAlphaChatCompletions, vocab.KindAlphaResponses, vocab.KindAlpha:
		out.Usage, out.found, err = alpha.BillBody(kind, op, body)
	default:
		out.Usage, out.found, err = gamma.BillBody(kind, op, body, nil)
	}
	if err != nil {
		return usageAndModel{}, err
	}
	var m struct {
		Model        string `json:"model"`
		ModelVersion string `json:"modelVersion"`
	}
	if json.Unmarshal(body, &m) == nil {
		out.model = m.Model
		if out.model == "" {
			out.model = m.ModelVersion
		}
	}
	return out, nil
}
