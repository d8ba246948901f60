package proxy

import (
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/dataplane/settle"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// The cost headers (docs/cost.md, "Cost on every answer"), in the gateway's namespace beside X-Request-Id.
const (
	hdrCost        = "X-Tollgate-Cost"
	hdrRule        = "X-Tollgate-Price-Rule"
	hdrRuleVersion = "X-Tollgate-Price-Rule-Version"
	hdrTier        = "X-Tollgate-Service-Tier"
	hdrSource      = "X-Tollgate-Usage-Source"
	// hdrIncludeCost is the request header a stream's client asks for its cost with.
	hdrIncludeCost = "X-Tollgate-Include-Cost"
)

// costTrailerDecl is the Trailer header of an answer whose cost comes after its body.
var costTrailerDecl = []string{hdrCost + ", " + hdrRule + ", " + hdrRuleVersion + ", " + hdrTier + ", " + hdrSource}

// costTeller is how a responder tells the call about its answer's cost (implemented by *call): the cost
// headers of an answer whose usage is known before its headers are written, or the declaration of the
// trailers of one whose headers leave first. A responder without one (nil) tells nothing.
type costTeller interface {
	// costHeaders sets the cost headers on hdr from res (Status, End and usage as the responder read them),
	// just before the headers are written.
	// res is passed by value: a pointer through this interface would move every Result to the heap.
	costHeaders(hdr http.Header, res Result)
	// costTrailers declares the cost trailers on hdr before the headers of an answer whose usage is not
	// known yet are written: a stream (only when its client asked) or a plain answer beyond the hold bound.
	costTrailers(hdr http.Header, stream bool)
	// wantsUsageChunk reports whether an alpha chat client asked for the usage chunk OpenRouter's way.
	wantsUsageChunk() bool
	// asksStreamCost reports whether the stream's final usage event carries the cost members.
	asksStreamCost() bool
	// streamCost appends the cost members priced from usage u to dst[:0]; nil when none are told.
	streamCost(dst []byte, u usage.Usage, found bool) []byte
}

// asksCost reports whether the client asked for its stream's cost: X-Tollgate-Include-Cost true or 1.
func asksCost(r *http.Request) bool {
	v := r.Header[hdrIncludeCost]
	return len(v) > 0 && (v[0] == "true" || v[0] == "1")
}

func (c *call) costHeaders(hdr http.Header, res Result) {
	if !c.disclose {
		return
	}
	c.absorb(&res)
	c.status, c.end = res.Status, res.End
	p := c.h.price(c)
	c.told, c.toldFrom, c.toldSet = p, c.priceInputs(), true
	setCost(hdr, p)
}

// priceInputs are what the price of the request's outcome depends on (settle.Price): when they are the
// same at settlement, the record takes the price the answer told instead of computing it again.
type priceInputs struct {
	usage      usage.Usage
	usageFound bool
	source     vocab.UsageSource
	end        vocab.EndState
	provider   int64
	model      string
	tier       string
}

func (c *call) priceInputs() priceInputs {
	var pid int64
	if c.cand.Provider != nil {
		pid = c.cand.Provider.ID
	}
	return priceInputs{c.usage, c.usageFound, c.source, c.end, pid, c.cand.UpstreamModel, c.reqTier}
}

func (c *call) costTrailers(hdr http.Header, stream bool) {
	if !c.disclose || (stream && !c.askCost) {
		return
	}
	hdr["Trailer"] = costTrailerDecl
	delete(hdr, "Content-Length") // trailers need a chunked body (HTTP/1.1); HTTP/2 carries them either way
	c.trailers = true
}

// price is what the request's settlement record will price it at (settle.Price of the same outcome).
func (h *Handler) price(c *call) settle.Priced { return settle.Price(h.outcome(c)) }

// setCost writes the five cost fields on hdr (headers, or trailers once the headers were written).
func setCost(hdr http.Header, p settle.Priced) {
	src := p.Source
	if src == "" {
		src = vocab.SourceNone
	}
	// One backing array for the five values (one allocation, not five).
	v := [...]string{p.Cost, strconv.FormatInt(p.RuleID, 10), strconv.FormatInt(p.RuleVersion, 10), string(src), p.Tier}
	vals := v[:]
	hdr[hdrCost] = vals[0:1:1]
	hdr[hdrRule] = vals[1:2:2]
	hdr[hdrRuleVersion] = vals[2:3:3]
	hdr[hdrSource] = vals[3:4:4]
	if p.Tier != "" {
		hdr[hdrTier] = vals[4:5:5]
	}
}

// absorb keeps a responder's result in c: the upstream's usage, else the local count of the upstream request
// (the attempt's body in the upstream's dialect: the translated body of a transform_to attempt) and the
// output the responder collected. It runs once per answer: when the cost headers are set before the
// answer's headers, respond does not repeat it.
func (c *call) absorb(res *Result) {
	if c.absorbed {
		return
	}
	c.absorbed = true
	h, out := c.h, c.out
	// The usage the upstream reported is kept even when its answer cannot reach the client (Refused): the
	// provider charged for it.
	c.usage, c.usageFound = res.Usage, res.UsageFound
	if res.UsageFound {
		c.source = vocab.SourceUpstream
	}
	if res.Refused != nil {
		return
	}
	switch {
	case res.UsageFound && res.OutputUnreported && res.OutputBytes > 0 && h.o.LocalUsage != nil && c.billable() && consumedEnd(res.End):
		// The input side as reported, the output the provider generated counted from the relayed text
		// (docs/settlement.md, "Settlement record"); without relayed text or a count the reported usage
		// (message_start's placeholder output) stands.
		if lu, found := h.o.LocalUsage(out.kind, out.op, c.cand.UpstreamModel, out.body, res.Output, res.OutputBytes); found {
			u := res.Usage
			u.Output = lu.Output
			c.usage, c.source = u, vocab.SourceLocal
		}
	case res.UsageFound: // billed as reported
	case h.o.LocalUsage != nil && res.Status < 300 && c.billable():
		// The upstream request and the upstream's output text, counted in the upstream's dialect.
		if u, found := h.o.LocalUsage(out.kind, out.op, c.cand.UpstreamModel, out.body, res.Output, res.OutputBytes); found {
			u.ReportedTier = res.Usage.ReportedTier // the upstream's reported tier still wins when counting locally
			c.usage, c.usageFound, c.source = u, true, vocab.SourceLocal
		}
	}
}
