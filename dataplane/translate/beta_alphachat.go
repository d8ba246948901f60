package translate

// betaAlphaChat: beta client, alpha chat upstream. Thinking blocks are dropped from history (alpha chat
// cannot verify signatures); top_k is dropped; a thinking budget becomes reasoning_effort. See
// docs/translation.md for the full table.
var betaAlphaChat = pairPolicy{}
