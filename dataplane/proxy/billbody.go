package proxy

import (
	"net/http"

	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// bodyUsage is the billed usage of a buffered answer of kind and op (the whole body, or the usage members a
// jsonkit.BodyScanner kept of it): its dialect package's body billing (beta.BillBody, alpha.BillBody,
// gamma.BillBody). Operations that are not billed return found=false and no error.
func bodyUsage(kind vocab.Kind, op vocab.Operation, body []byte, hdr http.Header) (usage.Usage, bool, error) {
	switch kind {
	case vocab.KindBetaMessages:
		return beta.BillBody(body)
	}
	switch kind.Family() {
	case vocab.KindAlpha:
		return alpha.BillBody(kind, op, body)
	case vocab.KindGamma:
		return gamma.BillBody(kind, op, body, hdr)
	}
	return usage.Usage{}, false, nil
}
