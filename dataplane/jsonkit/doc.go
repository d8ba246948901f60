// Package jsonkit is the data plane's JSON toolkit for the dialect code: the hand-written reader of request
// bodies (Reader) and of stream events (EventReader, which declines to the general decoder on any shape it
// does not handle), the writer of upstream requests and client events (Writer), and the helpers around the
// go-json-experiment library (Unmarshal and UnmarshalEvent with the options every dialect decodes with,
// AppendJSON/Marshal, compacting and validity checks, argument text <-> object, value kinds). It also holds
// the proxy's one reading of a client request body (ParseRequest, on a strict validator), the one pass over
// a relayed stream event's top-level members that the dialects' relay readers decide the event by
// (ReadRelay), the framing of gamma's JSON-array streams (JSONArrayDecoder), and the usage values as
// providers write them that the dialects' usage objects are read into (Count, Name), and the byte-keeping
// edits of a body the gateway forwards (Request.AppendForwarded for passthrough, Patch for same-kind
// buffered cells and count_tokens, AppendWithMembers/AppendWithoutMember, the stored-resource lookups
// Member/Members2 on the structural walks walkMembers and walkElements).
//
// It is the only package of the module allowed `unsafe`, the library's token level (jsontext), and
// byte-level JSON scanning (TestOnlyJSONKitReadsJSONByHand fails for any other file; only
// dataplane/admission/shards.go, whose braces are Redis hash tags, is exempt).
// Readers match members by name: a dialect switches on MemberNames.Match(name), which applies the library's
// matching (exact name first, else strings.EqualFold) to the struct's declared names; a fast event reader
// records the members it read by name (Seen) and declines a duplicate.
//
// The hand code that remains: Reader and EventReader read a translated request or stream event in one
// pass into the dialect's structs, with strings and raw values that are views of the body (no copies), and
// accept exactly what Unmarshal accepts with the same values (FuzzHandDecoders, FuzzRequestDecodersAgree and
// FuzzEventScan in dataplane/translate compare them with the library). They are not built on jsontext
// because its token reader alone exceeds the budget of 1.5x today's translation time: walking a 10 KB
// benchmark request token by token (jsontext.Decoder.ReadToken, strings unquoted) costs about 510,000
// instructions, against about 120,000 for Reader validating and skipping the same body and about 330,000
// for the whole translation of it (decode, convert, encode: BenchmarkReadTokens and BenchmarkTranslateRequest
// in dataplane/translate, counted with callgrind). Writer writes the bytes encoding/json would write for
// the same structs, into one buffer.
package jsonkit
