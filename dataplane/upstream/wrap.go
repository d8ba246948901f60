package upstream

import "net/http"

// Wrap puts wrap(transport) between Do and the pooled transport: dataplane/telemetry's per-attempt
// metrics, client spans and trace-context propagation. Call it before the client is used (it is not
// synchronised with Do).
func (c *Client) Wrap(wrap func(http.RoundTripper) http.RoundTripper) { c.rt = wrap(c.rt) }
