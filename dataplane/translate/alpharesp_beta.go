package translate

// alphaResponsesBeta: alpha responses client, beta upstream. Reasoning items whose encrypted_content came
// from beta (a thinking signature) are replayed as thinking blocks; text.format json_object is refused. See
// docs/translation.md for the full table.
var alphaResponsesBeta = pairPolicy{refuseJSONObject: true}
