// Package canon is the canonical, dialect-neutral form every translation goes through: the request
// (Request, Message, Part, Tool, ...), the buffered response (Response), stream events (Event), finish
// reasons (Finish), usage (Usage), the upstream API error (APIError) and the refused request
// (RequestError), and the per-request state the codecs of one translation share (State).
//
// Each dialect package (dataplane/dialect/alpha, beta, gamma) implements Codec: its decoder into and
// encoder out of this form, for requests, responses and stream events, and the rules it imposes as a
// destination. A pair of dialects is the composition of two codecs through this form (dataplane/translate);
// the helpers here are what more than one dialect uses to convert (data URLs, ids, thinking signatures,
// tool-call names, text of parts).
package canon
