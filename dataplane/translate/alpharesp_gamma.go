package translate

// alphaResponsesGamma: alpha responses client, gamma upstream. Reasoning items carry gamma thoughtSignatures
// in encrypted_content and are replayed as thoughtSignature on the next part. See docs/translation.md for the
// full table.
var alphaResponsesGamma = pairPolicy{}
