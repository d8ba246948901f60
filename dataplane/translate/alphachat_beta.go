package translate

// alphaChatBeta: alpha chat client, beta upstream. System messages are hoisted into system; max_tokens
// defaults to Options.BetaMaxTokens; temperature is clamped to 0..1; response_format json_object is refused
// (beta needs a schema); seed and penalties are dropped. See docs/translation.md for the full table.
var alphaChatBeta = pairPolicy{refuseJSONObject: true}
