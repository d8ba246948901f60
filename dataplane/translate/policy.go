package translate

import (
	"errors"

	"github.com/tollgate/tollgate/shared/vocab"
)

// pairPolicy is what a pair adds to the generic conversion: the destination-specific refusals. Fields the
// canonical form cannot carry at all are refused by the client dialect's decoder for every pair.
type pairPolicy struct {
	// refuseStop: the destination has no stop sequences (alpha responses).
	refuseStop bool
	// refuseJSONObject: the destination has no schema-less JSON mode (beta).
	refuseJSONObject bool
	// identity: same kind on both sides (buffered synthesis only): the request is patched, not re-encoded.
	identity bool
}

// pairPolicyFor is the plain switch choosing a pair's policy.
func pairPolicyFor(client, dest vocab.Kind) (pairPolicy, bool) {
	const (
		chat  = vocab.KindAlphaChatCompletions
		resp  = vocab.KindAlphaResponses
		beta  = vocab.KindBetaMessages
		gamma = vocab.KindGammaGenerateContent
	)
	switch {
	case client == chat && dest == resp:
		return alphaChatAlphaResponses, true
	case client == chat && dest == beta:
		return alphaChatBeta, true
	case client == chat && dest == gamma:
		return alphaChatGamma, true
	case client == resp && dest == chat:
		return alphaResponsesAlphaChat, true
	case client == resp && dest == beta:
		return alphaResponsesBeta, true
	case client == resp && dest == gamma:
		return alphaResponsesGamma, true
	case client == beta && dest == chat:
		return betaAlphaChat, true
	case client == beta && dest == resp:
		return betaAlphaResponses, true
	case client == beta && dest == gamma:
		return betaGamma, true
	case client == gamma && dest == chat:
		return gammaAlphaChat, true
	case client == gamma && dest == resp:
		return gammaAlphaResponses, true
	case client == gamma && dest == beta:
		return gammaBeta, true
	case client == dest && client.IsGeneration():
		return pairPolicy{identity: true}, true
	}
	return pairPolicy{}, false
}

// fieldNames names, per client kind, the request fields a pair policy may refuse.
var fieldNames = map[vocab.Kind]map[string]string{
	vocab.KindAlphaChatCompletions: {"stop": "stop", "format": "response_format", "tool_result": "messages.tool_call_id"},
	vocab.KindAlphaResponses:       {"stop": "stop", "format": "text.format", "tool_result": "input.function_call_output.call_id"},
	vocab.KindBetaMessages:         {"stop": "stop_sequences", "format": "output_config.format", "tool_result": "messages.content.tool_use_id"},
	vocab.KindGammaGenerateContent: {"stop": "generationConfig.stopSequences", "format": "generationConfig.responseMimeType", "tool_result": "contents.parts.functionResponse"},
}

func (p pairPolicy) check(r *request, st *reqState) error {
	names := fieldNames[st.client]
	if p.refuseStop && len(r.Stop) > 0 {
		return refuse(names["stop"], "the destination has no stop sequences; remove them or route to another provider")
	}
	if p.refuseJSONObject && r.Format != nil && r.Format.Type == "json_object" {
		return refuse(names["format"], "the destination supports JSON output only with a schema (json_schema)")
	}
	return nil
}

func asRequestError(err error) *RequestError {
	var re *RequestError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

func codecFor(k vocab.Kind) codec {
	switch k {
	case vocab.KindAlphaChatCompletions:
		return alphaChat{}
	case vocab.KindAlphaResponses:
		return alphaResp{}
	case vocab.KindBetaMessages:
		return betaMsgs{}
	case vocab.KindGammaGenerateContent:
		return gammaGen{}
	}
	return nil
}
