package translate

// alphaChatGamma: alpha chat client, gamma upstream. System messages become systemInstruction; tool results
// need the function name, taken from the earlier call with the same id; everything else in the canonical form
// maps. See docs/translation.md for the full table.
var alphaChatGamma = pairPolicy{}
