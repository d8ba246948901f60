package translate

// betaGamma: beta client, gamma upstream. Thinking signatures become thoughtSignature on the following part;
// tool_result blocks become functionResponse parts named after their tool_use. See docs/translation.md for
// the full table.
var betaGamma = pairPolicy{}
