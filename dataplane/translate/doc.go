// Package translate owns the `transform_to` implementation of the data plane: it converts requests,
// responses, errors and streams between the content-generation dialects (alpha chat completions, alpha
// responses, beta messages, gamma generateContent), converts embeddings alpha <-> gamma and token counting
// between the families, and synthesises a client stream from one buffered upstream response (with
// per-dialect keepalives) when the destination cannot stream.
//
// It holds the composition only. Every conversion goes through the canonical form (dataplane/canon); each
// dialect package (dataplane/dialect/alpha, beta, gamma) is a canon.Codec: a decoder into the form and an
// encoder out of it, and the rules it imposes as a destination. A pair is the client's codec composed with
// the upstream's. A Translator is created per request with New and is not safe for concurrent use.
//
// Typical use by the data plane:
//
//	t, err := translate.New(translate.Pair{Op: op, Kind: kind, DestOp: destOp, DestKind: destKind}, opts)
//	up, err := t.Request(translate.ClientRequest{Body: body, Model: upstreamModel, Stream: wantsStream})
//	// send up.Method up.Path with up.Header and up.Body; then, depending on t.Mode():
//	//   ModeBuffered:   status/body -> t.Response or t.Error
//	//   ModeStream:     s := t.NewStream(w); s.Pump(upstreamBody, false, flush)
//	//   ModeSynthesize: t.SynthesizeWhile(ctx, interval, w, flush, fetch) (keepalives, then the stream)
package translate
