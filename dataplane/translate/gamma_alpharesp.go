package translate

// gammaAlphaResponses: gamma client, alpha responses upstream. stopSequences are refused; safetySettings are
// dropped. See docs/translation.md for the full table.
var gammaAlphaResponses = pairPolicy{refuseStop: true}
