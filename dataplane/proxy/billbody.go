package proxy

import (
	"net/http"

	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// bodyUsage is the billed usage of a buffered answer of kind and op (the whole body, or the usage members a
// usage.BodyScanner kept of it): the dialect package's body billing where it has one (beta messages, every
// alpha operation), else usage.FromBody. Operations that are not billed return found=false and no error.
func bodyUsage(kind vocab.Kind, op vocab.Operation, body []byte, hdr http.Header) (usage.Usage, bool, error) {
	switch kind {
	case vocab.KindBetaMessages:
		return beta.BillBody(body)
	}
	if kind.Family() == vocab.KindAlpha {
		return alpha.BillBody(kind, op, body)
	}
	return usage.FromBody(kind, op, body, hdr)
}
