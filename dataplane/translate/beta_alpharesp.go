package translate

// betaAlphaResponses: beta client, alpha responses upstream (the default beta -> alpha cell). stop_sequences
// are refused; thinking blocks whose signature carries an alpha reasoning item are replayed as reasoning
// items, others are dropped. See docs/translation.md for the full table.
var betaAlphaResponses = pairPolicy{refuseStop: true}
