package translate

// alphaResponsesAlphaChat: alpha responses client, alpha chat upstream. instructions becomes a system
// message; reasoning items are dropped (chat cannot replay them); the upstream stream is forced to include
// usage. See docs/translation.md for the full table.
var alphaResponsesAlphaChat = pairPolicy{}
