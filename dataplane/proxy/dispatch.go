package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/dataplane/httperr"
	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/dataplane/upstream"
	"github.com/tollgate/tollgate/shared/pricing"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// statusClientClosed is recorded (never sent) when the client went away before an answer was written.
const statusClientClosed = 499

// Transformer serves transform_to cells (dataplane/translate behind a small adapter).
type Transformer interface {
	// Supports reports whether the inbound class can be served through cell.
	Supports(class Class, cell snapshot.Cell) bool
	// Begin converts the client request for one candidate. An error is a client error (answered as is when
	// it is an *httperr.Error, else as 400). body is lent, not given: the Handler neither writes to it nor
	// reuses its memory until the request ends (ServeHTTP returns, after the last call of the returned
	// Transform), so the Transform may keep pointing into it until then but not after.
	Begin(class Class, cell snapshot.Cell, body []byte, upstreamModel string) (Transform, error)
}

// Transform is one candidate attempt through a translator: the upstream request, and the Responder that
// turns the upstream's answer into the client's.
type Transform interface {
	// Request returns the upstream method, path with query, extra headers and body.
	Request() (method, pathQuery string, header http.Header, body []byte)
	Responder
}

// outbound is one upstream request to send.
type outbound struct {
	method string
	url    string
	header http.Header
	body   []byte
	// kind and op are the upstream's dialect and operation: the client's for passthrough, the cell's
	// destination for transform_to. A local count reads body in them (what the provider bills).
	kind vocab.Kind
	op   vocab.Operation
	// resp answers the client from the upstream response: the call's passthrough responder or the transform.
	resp Responder
}

// dispatch tries the usable candidates in order, each with its credentials in order, failing over on a
// connection error, 429 or 5xx (nothing has reached the client then), and hands the first answer that is
// not failed over to the candidate's Responder. It returns nil when the responder answered (the outcome is
// in c), else the error to answer — nothing was written then — with c.end and c.cand set for the record.
func (h *Handler) dispatch(w http.ResponseWriter, r *http.Request, c *call) error {
	ctx := r.Context()
	var lastErr error
	timedOut := false
	attempted := false
	var rejected *httperr.Error
	var rejectedCand candidateCell
	// limited stays set while every attempt was answered 429; retryAfter is the shortest wait one named.
	limited, retryAfter := true, time.Duration(0)
	for _, cc := range c.usable {
		if cc.cell.Impl == vocab.ImplLocal {
			continue // only the first candidate may answer locally (handled before dispatch)
		}
		out, err := h.prepare(r, c, cc)
		if err != nil {
			// This candidate cannot carry the request (e.g. a field its translation refuses): try the next.
			if rejected == nil {
				rejected, rejectedCand = httperr.As(err), cc
			}
			continue
		}
		creds := h.o.Upstream.Credentials(cc.Provider, c.creds[:0])
		if len(creds) == 0 {
			creds = append(creds, snapshot.Credential{}) // a provider without credentials (e.g. a local server)
		}
		for _, cr := range creds {
			attempted = true
			c.cand, c.credID = cc, cr.ID
			var stop func() bool
			if wt, ok := out.resp.(waiter); ok {
				stop = wt.Wait(ctx, w)
			}
			resp, err := h.send(ctx, cc.Provider, cr, out)
			if stop != nil && stop() {
				// A keepalive already reached the client: no failover; the translator ends the stream.
				if err != nil {
					resp = &http.Response{StatusCode: http.StatusBadGateway, Header: http.Header{}, Body: http.NoBody}
				}
				_ = h.respond(ctx, w, c, out, resp) // a synthesised stream has written: never Failed
				return nil
			}
			if err == nil && upstream.Retryable(resp.StatusCode) {
				if resp.StatusCode != http.StatusTooManyRequests {
					limited = false
				} else if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), h.o.Now()); ok && (retryAfter == 0 || d < retryAfter) {
					retryAfter = d
				}
				drain(resp)
				h.o.Upstream.Fail(cr.ID)
				lastErr, timedOut = fmt.Errorf("provider %s answered %d", cc.Provider.Name, resp.StatusCode), false
				continue
			}
			if err == nil {
				err = h.respond(ctx, w, c, out, resp)
				if err == nil {
					return nil
				}
				if refused := asRefused(err); refused != nil {
					c.end = vocab.EndUpstreamError
					return refused
				}
				// Cut before the first body byte: nothing reached the client, so this is a failed attempt.
			}
			if ctx.Err() != nil {
				return fmt.Errorf("provider %s: %w", cc.Provider.Name, err) // the client went away: no failover
			}
			h.o.Upstream.Fail(cr.ID)
			lastErr, timedOut, limited = fmt.Errorf("provider %s: %w", cc.Provider.Name, err), upstream.IsTimeout(err), false
		}
	}
	if !attempted && rejected != nil {
		c.cand, c.end = rejectedCand, vocab.EndRejected
		return rejected
	}
	if !attempted {
		c.cand = c.usable[0]
	}
	e := httperr.AllFailed(lastErr)
	switch {
	case attempted && limited:
		// Every candidate is rate limited: the client's SDK raises its rate-limit error and backs off.
		e = httperr.RateLimited("every upstream candidate is rate limited; retry later", retryAfter)
		e.Cause = lastErr
	case timedOut:
		e = httperr.Timeout(lastErr)
	}
	c.end = vocab.EndUpstreamError
	return e
}

// asRefused returns err as the gateway error a responder refused with, nil for a failed attempt.
func asRefused(err error) *httperr.Error {
	var refused *httperr.Error
	if errors.As(err, &refused) {
		return refused
	}
	return nil
}

// waiter is implemented by transforms that keep the client alive while a buffered upstream is awaited.
type waiter interface {
	Wait(ctx context.Context, w http.ResponseWriter) (stop func() (wrote bool))
}

// respond has out's responder answer the client and keeps the outcome in c: the upstream's usage, else the
// local count of the upstream request (out's body in the upstream's dialect: the translated body of a
// transform_to attempt) and the output the responder collected. An error means nothing was written: an
// *httperr.Error to answer, or a failed attempt (Result.Failed).
func (h *Handler) respond(ctx context.Context, w http.ResponseWriter, c *call, out outbound, resp *http.Response) error {
	c.out, c.absorbed = out, false
	res := out.resp.Respond(ctx, w, resp)
	resp.Body.Close()
	if res.Failed != nil {
		return res.Failed
	}
	c.absorb(&res)
	if res.Refused != nil {
		return res.Refused
	}
	c.status, c.end, c.firstByte, c.abortClient = res.Status, res.End, res.FirstByte, res.Abort
	if c.trailers {
		setCost(w.Header(), h.price(c)) // after the body: sent as trailers when the handler returns
	}
	return nil
}

// prepare builds the upstream request of one candidate.
func (h *Handler) prepare(r *http.Request, c *call, cc candidateCell) (outbound, error) {
	p := cc.Provider
	if cc.cell.Impl == vocab.ImplTransformTo {
		tr, err := h.o.Transformer.Begin(c.class, cc.cell, c.body, cc.UpstreamModel)
		if err != nil {
			var he *httperr.Error
			if errors.As(err, &he) {
				return outbound{}, he
			}
			return outbound{}, httperr.Malformed(err.Error(), err)
		}
		if ct, ok := tr.(interface{ setCost(costTeller) }); ok {
			ct.setCost(c)
		}
		method, pq, hdr, body := tr.Request()
		out := outbound{method: method, url: p.BaseURL + pq, header: upstream.OutboundHeader(r.Header), body: body,
			kind: cc.cell.DestKind, op: cc.cell.DestOp, resp: tr}
		delete(out.header, "Content-Type")
		for k, v := range hdr {
			out.header[k] = v
		}
		if _, ok := out.header["Content-Type"]; !ok && len(body) > 0 {
			out.header["Content-Type"] = []string{"application/json"}
		}
		return out, nil
	}
	out := outbound{method: r.Method, header: upstream.OutboundHeader(r.Header), body: c.body, kind: c.class.Kind, op: c.class.Op, resp: &c.pt}
	path := r.URL.EscapedPath()
	switch {
	case c.stored:
		path = c.storedPath // the upstream id restored
	case c.class.PathModel != "" && cc.UpstreamModel != c.class.PathModel:
		path = renamePathModel(path, c.class, cc.UpstreamModel)
	case c.class.Kind.Family() == vocab.KindGamma && strings.HasPrefix(path, "/v1/"):
		path = "/v1beta/" + path[len("/v1/"):] // gamma is forwarded at its v1beta path, the superset
	case c.class.Multipart && cc.UpstreamModel != c.model:
		b, err := patchMultipartModel(r.Header.Get("Content-Type"), c.body, cc.UpstreamModel)
		if err != nil {
			return outbound{}, httperr.Malformed(err.Error(), err)
		}
		out.body = b
	case c.class.ModelInBody && !c.class.Multipart && (cc.UpstreamModel != c.model || c.askUsage()):
		c.patch = c.req.AppendForwarded(c.patch, c.body, cc.UpstreamModel, cc.UpstreamModel != c.model, c.askUsage())
		out.body = c.patch
	}
	c.pt.class, c.pt.billable, c.pt.collect = c.class, c.billable(), h.o.LocalUsage != nil
	// The relay drops the usage chunk the client did not ask for, unless it asked for its cost, which the
	// usage chunk carries.
	c.pt.costEvents = c.asksStreamCost()
	c.pt.dropUsage = c.askUsage() && !c.pt.costEvents && !c.usageChunk
	c.pt.ids, c.pt.cost = 0, c
	if storesIDs(c.class) {
		c.pt.ids = p.ID // the ids of stored responses and conversations name their provider
	}
	var sb strings.Builder
	sb.Grow(len(p.BaseURL) + len(path) + len(r.URL.RawQuery) + 1)
	sb.WriteString(p.BaseURL)
	sb.WriteString(path)
	if q := stripKeyParam(r.URL.RawQuery); q != "" {
		sb.WriteByte('?')
		sb.WriteString(q)
	}
	out.url = sb.String()
	return out, nil
}

// askUsage reports whether a passthrough request is an alpha chat stream whose client did not ask for
// usage: the gateway asks the upstream for it (stream_options.include_usage), so cache and reasoning
// tokens are billed as reported, and drops the extra usage chunk from the client's stream.
func (c *call) askUsage() bool {
	return c.class.Kind == vocab.KindAlphaChatCompletions && c.class.Stream && !c.req.IncludeUsage
}

// renamePathModel rewrites the model segment of a gamma method path or a model get path.
func renamePathModel(escapedPath string, class Class, model string) string {
	if class.Kind.Family() == vocab.KindGamma {
		if class.Op == vocab.OpGetModel {
			return "/v1beta/models/" + escapePath(model)
		}
		verb := escapedPath[strings.LastIndexByte(escapedPath, ':'):]
		return "/v1beta/models/" + escapePath(model) + verb
	}
	return "/v1/models/" + escapePath(model)
}

// escapePath escapes a model id for a path, keeping '/' (scoped and tuned model names).
func escapePath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '/' || c == '-' || c == '.' || c == '_' || c == '~' || c == '@' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// stripKeyParam removes the client's key= query parameter (the gateway key must not reach a provider).
func stripKeyParam(q string) string {
	if !strings.Contains(q, "key=") {
		return q
	}
	var b strings.Builder
	for q != "" {
		var kv string
		kv, q, _ = strings.Cut(q, "&")
		if kv == "" || strings.HasPrefix(kv, "key=") || kv == "key" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(kv)
	}
	return b.String()
}

func (h *Handler) send(ctx context.Context, p *snapshot.Provider, cr snapshot.Credential, out outbound) (*http.Response, error) {
	var body io.Reader = http.NoBody
	if len(out.body) > 0 {
		body = bytes.NewReader(out.body)
	}
	req, err := http.NewRequestWithContext(ctx, out.method, out.url, body)
	if err != nil {
		return nil, fmt.Errorf("build upstream request: %w", err)
	}
	// out.header is this request's own copy: setting the credential overwrites the previous attempt's.
	if cr.Secret != "" {
		upstream.SetAuth(out.header, p.Channel, cr.Secret)
	}
	req.Header = out.header
	resp, err := h.o.Upstream.Do(req)
	if err != nil {
		return nil, fmt.Errorf("upstream %s %s: %w", out.method, p.Name, err)
	}
	return resp, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// parseRetryAfter reads a Retry-After value: delay seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 || n > maxRetryAfter {
			return 0, false
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := max(t.Sub(now), 0)
	if d > maxRetryAfter*time.Second {
		return 0, false
	}
	return d, true
}

// maxRetryAfter bounds an upstream Retry-After passed on to the client (seconds; a larger value is ignored).
const maxRetryAfter = 24 * 60 * 60

// settle hands the facts of how the request ended (settle.Outcome) to the recorder, which builds and
// appends the request's one settlement record. It runs for every request that reached dispatch, however
// it ended.
func (h *Handler) settle(ctx context.Context, c *call) {
	if c.settled {
		return
	}
	c.settled = true
	h.count(c, c.status)
	if h.o.Recorder == nil {
		if h.o.Admitter != nil && c.hold.Micros > 0 {
			if err := h.o.Admitter.Refund(context.WithoutCancel(ctx), c.hold); err != nil {
				h.o.Log.Error("refund hold", "request_id", c.reqID, "err", err)
			}
		}
		return
	}
	o := h.outcome(c)
	if c.toldSet && !c.stored && c.priceInputs() == c.toldFrom {
		o.Priced = &c.told // the same inputs: the record is priced as the answer told, without pricing again
	}
	if _, err := h.o.Recorder.Record(context.WithoutCancel(ctx), o, c.hold); err != nil {
		h.o.Log.Error("record settlement", "request_id", c.reqID, "err", err)
	}
}

// consumedEnd reports whether a request that ended so delivered output the provider generated (completed,
// interrupted, or left by its client).
func consumedEnd(e vocab.EndState) bool {
	return e == vocab.EndCompleted || e == vocab.EndUpstreamInterrupted || e == vocab.EndClientDropped
}

// outcome is the facts of how the request ended, as its settlement record takes them (settle.Outcome).
func (h *Handler) outcome(c *call) settle.Outcome {
	k, p := c.key, c.cand.Provider
	var providerID int64
	var rule *pricing.Rule
	if p != nil { // list_models has no candidate provider
		providerID = p.ID
		rule = c.snap.ResolvePriceAt(p.ID, c.cand.UpstreamModel, c.start)
	}
	estimate := pricing.BytesPerTokenEstimator(len(c.body))
	if c.stored {
		rule, estimate = nil, 0 // a stored-resource request is recorded at cost 0
	}
	if c.billable() && c.reqTier == "" {
		c.reqTier = tierOf(c.req)
	}
	o := settle.Outcome{
		RequestID: c.reqID, Start: c.start,
		KeyID: k.ID, UserID: k.UserID, TeamID: k.TeamID, OrgID: k.OrgID,
		ProviderID: providerID, CredentialID: c.credID,
		LogicalModel: c.model, UpstreamModel: c.cand.UpstreamModel,
		Operation: c.class.Op, InboundKind: c.class.Kind,
		Implementation: c.cand.cell.Impl, DestKind: c.cand.cell.DestKind,
		SnapshotVersion: c.snap.Version,
		Rule:            rule,
		RequestedTier:   c.reqTier,
		Upstream:        c.usage, UpstreamFound: c.usageFound && c.source == vocab.SourceUpstream,
		EstimateTokens: estimate,
		EndState:       c.end, HTTPStatus: c.status,
		Latency: h.o.Now().Sub(c.start),
	}
	if c.usageFound && c.source == vocab.SourceLocal {
		u := c.usage
		o.Local = &u
	}
	if c.route != nil {
		o.RouteID = c.route.ID
	}
	if !c.firstByte.IsZero() {
		o.FirstByte = c.firstByte.Sub(c.start)
	}
	return o
}
