// Package jsonkit is the data plane's JSON toolkit for the dialect code: the hand-written reader of request
// bodies (Reader) and of stream events (EventReader, which declines to the general decoder on any shape it
// does not handle), the writer of upstream requests and client events (Writer), and the helpers around the
// go-json-experiment library (Unmarshal and UnmarshalEvent with the options every dialect decodes with,
// AppendJSON/Marshal, compacting and validity checks, argument text <-> object).
//
// The readers are hand-written because a translated request or stream event is read in one pass into the
// dialect's structs, with strings that are views of the body (no copies); the dialect packages
// (dataplane/dialect/...) describe their members to it and fill their own structs. Reader accepts exactly
// what Unmarshal accepts and fills the same values (the fuzzers in dataplane/translate compare them).
package jsonkit
