package translate

// gammaAlphaChat: gamma client, alpha chat upstream (the default gamma -> alpha cell). Function calls without
// ids get synthesised ids (call_<turn>_<k>) matched to responses by name; safetySettings are dropped. See
// docs/translation.md for the full table.
var gammaAlphaChat = pairPolicy{}
