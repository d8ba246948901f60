package translate

// gammaBeta: gamma client, beta upstream. thoughtSignature becomes a signed thinking block before the part it
// was on; responseMimeType application/json without a schema is refused. See docs/translation.md for the full
// table.
var gammaBeta = pairPolicy{refuseJSONObject: true}
