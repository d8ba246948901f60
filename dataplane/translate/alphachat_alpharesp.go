package translate

// alphaChatAlphaResponses: alpha chat client, alpha responses upstream. System/developer messages become
// instructions; tool messages become function_call_output items; stop is refused (responses has none); seed,
// penalties and top_k are dropped; reasoning_content history is dropped (no signature to replay). See
// docs/translation.md for the full table.
var alphaChatAlphaResponses = pairPolicy{refuseStop: true}
