package usage

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/shared/vocab"
)

// Accumulator collects usage from a stream, one event at a time. Stream usage is cumulative:
// every accumulator keeps the latest value of each field and never adds events together.
// Accumulators are not safe for concurrent use; one belongs to one stream.
type Accumulator interface {
	// ObserveHeader records the upstream response header (only gamma reads it: x-gamma-service-tier).
	ObserveHeader(h http.Header)
	// Observe takes one SSE event's data payload, or one element of a gamma JSON-array stream.
	// "[DONE]", blank payloads and events without usage are accepted and ignored; a payload that
	// is not JSON returns an error and leaves the accumulated usage unchanged.
	Observe(data []byte) error
	// Result returns the usage so far; found is false while no event carried a usage object.
	Result() (Usage, bool)
}

// NewStreamAccumulator returns the accumulator for an inbound or upstream kind and operation:
// generation kinds by kind; family kind alpha with create_image/edit_image → the image stream.
// It returns nil for a combination that has no streamed usage.
func NewStreamAccumulator(kind vocab.Kind, op vocab.Operation) Accumulator {
	if kind == vocab.KindGammaGenerateContent {
		return &GammaStream{}
	}
	return nil
}

// FromBody extracts usage from a non-streaming response body of the given kind and operation,
// dispatching to the FromX functions. Operations that are not billed (models, count_tokens,
// compact, conversations) and unknown combinations return found=false and no error.
func FromBody(kind vocab.Kind, op vocab.Operation, body []byte, hdr http.Header) (Usage, bool, error) {
	switch kind.Family() {
	case vocab.KindGamma:
		switch {
		case kind == vocab.KindGammaGenerateContent:
			return FromGamma(body, hdr)
		case op == vocab.OpCreateEmbedding:
			return FromGammaEmbedding(body, hdr)
		}
	}
	return Usage{}, false, nil
}

// skip reports whether data is a payload that never carries usage: blank, an SSE comment
// remnant, or the alpha "[DONE]" sentinel.
func skip(data []byte) bool {
	data = bytes.TrimSpace(data)
	return len(data) == 0 || bytes.Equal(data, []byte("[DONE]"))
}

// mayCarry is a cheap prefilter: a payload that mentions none of the keys cannot carry usage or
// a tier, so it is not decoded. A false positive only costs a decode.
func mayCarry(data []byte, keys ...[]byte) bool {
	for _, k := range keys {
		if bytes.Contains(data, k) {
			return true
		}
	}
	return false
}

// streamError wraps a payload error with the dialect.
func streamError(what string, err error) error {
	return fmt.Errorf("decode %s stream event: %w", what, err)
}

var (
	gammaKeys = []string{"usageMetadata"}
)

// GammaStream accumulates gamma streamGenerateContent chunks (SSE data payloads or JSON-array
// elements): the latest usageMetadata snapshot, taken whole, and the x-gamma-service-tier header. Each
// chunk's usageMetadata is the running tally and proto3 JSON omits zero members, so a member absent from
// a later snapshot is 0 there: snapshots replace each other and are never merged field by field.
type GammaStream struct {
	f     gammaFields
	found bool
}

var keyUsageMetadata = []byte(`"usageMetadata"`)

// ObserveHeader implements Accumulator: x-gamma-service-tier is the reported tier.
func (s *GammaStream) ObserveHeader(h http.Header) { s.f.observeHeader(h) }

// Observe implements Accumulator.
func (s *GammaStream) Observe(data []byte) error {
	if skip(data) || !mayCarry(data, keyUsageMetadata) {
		return nil
	}
	var vals [1][]byte
	if err := objectFields(data, gammaKeys, vals[:]); err != nil {
		return streamError("gamma", err)
	}
	if isNull(vals[0]) {
		return nil
	}
	var u gammaUsageJSON
	if err := decodeGammaUsage(vals[0], &u); err != nil {
		return streamError("gamma", err)
	}
	s.f = gammaFields{headerTier: s.f.headerTier} // the header is not part of the snapshot
	s.f.mergeUsage(&u)
	s.found = true
	return nil
}

// Result implements Accumulator.
func (s *GammaStream) Result() (Usage, bool) { return s.f.usage(), s.found }
