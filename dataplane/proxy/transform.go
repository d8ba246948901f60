package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/dataplane/httperr"
	"github.com/tollgate/tollgate/dataplane/translate"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/usage"
	"github.com/tollgate/tollgate/shared/vocab"
)

// maxUpstreamBody bounds a buffered upstream body read for translation.
const maxUpstreamBody = 64 << 20

// Translator serves transform_to cells with package translate.
type Translator struct {
	// Options are passed to translate.New.
	Options translate.Options
	// KeepaliveInterval is the keepalive period while a synthesised stream waits for a buffered upstream.
	KeepaliveInterval time.Duration
	// Now is the clock of first-byte times (default time.Now).
	Now func() time.Time

	supported sync.Map // translate.Pair → bool: Supports answers without building a translator
}

func pairOf(class Class, cell snapshot.Cell) translate.Pair {
	return translate.Pair{Op: class.Op, Kind: class.Kind, DestOp: cell.DestOp, DestKind: cell.DestKind}
}

// Supports implements Transformer: the translator has the pair. The answer depends only on the pair, so
// it is remembered: a translator is built once per candidate attempt (Begin), not also to ask.
func (t *Translator) Supports(class Class, cell snapshot.Cell) bool {
	p := pairOf(class, cell)
	if v, ok := t.supported.Load(p); ok {
		return v.(bool)
	}
	_, err := translate.New(p, t.Options)
	t.supported.Store(p, err == nil)
	return err == nil
}

// Begin implements Transformer.
func (t *Translator) Begin(class Class, cell snapshot.Cell, body []byte, upstreamModel string) (Transform, error) {
	tr, err := translate.New(pairOf(class, cell), t.Options)
	if err != nil {
		return nil, httperr.Unsupported(class.Op, class.Kind, "no translation to "+string(cell.DestKind))
	}
	// The body is lent (Transformer.Begin): the translator decodes it in place instead of copying it.
	up, err := tr.Request(translate.ClientRequest{Body: body, Model: upstreamModel, Stream: class.Stream, GammaSSE: class.GammaSSE, Lent: true})
	if err != nil {
		e := httperr.Malformed(err.Error(), err)
		var re *translate.RequestError
		if errors.As(err, &re) {
			e.Message, e.Param = re.Message, re.Field
		}
		return nil, e
	}
	now := t.Now
	if now == nil {
		now = time.Now
	}
	return &transformAttempt{t: t, tr: tr, up: up, class: class, cell: cell, now: now}, nil
}

type transformAttempt struct {
	t     *Translator
	tr    *translate.Translator
	up    *translate.UpstreamRequest
	class Class
	cell  snapshot.Cell
	now   func() time.Time

	cost costTeller // the call's cost headers and trailers (nil: none)

	mu        sync.Mutex // serialises keepalive writes with Respond's
	wrote     bool
	firstByte time.Time
}

func (a *transformAttempt) setCost(ct costTeller) {
	a.cost = ct
	if a.class.Kind == vocab.KindAlphaChatCompletions && a.class.Stream && (ct.asksStreamCost() || ct.wantsUsageChunk()) {
		a.tr.ShowUsage() // the usage chunk carries the cost
	}
}

// tellTrailers declares the cost trailers of a stream (the client asked) before its headers are written.
func (a *transformAttempt) tellTrailers(hdr http.Header) {
	if a.cost != nil {
		a.cost.costTrailers(hdr, true)
	}
}

// tellHeaders sets the cost headers of a whole answer before its headers are written.
func (a *transformAttempt) tellHeaders(hdr http.Header, res *Result) {
	if a.cost != nil {
		a.cost.costHeaders(hdr, *res)
	}
}

func (a *transformAttempt) Request() (string, string, http.Header, []byte) {
	return a.up.Method, a.up.Path, a.up.Header, a.up.Body
}

// Wait starts keepalives for a synthesised stream while the buffered upstream is awaited; stop ends them
// and reports whether any reached the client (then failover is no longer possible).
func (a *transformAttempt) Wait(ctx context.Context, w http.ResponseWriter) (stop func() (wrote bool)) {
	if a.tr.Mode() != translate.ModeSynthesize {
		return nil
	}
	kctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	flusher, _ := w.(http.Flusher)
	go func() {
		defer close(done)
		translate.RunKeepalive(kctx, a.t.KeepaliveInterval, func() error {
			a.mu.Lock()
			defer a.mu.Unlock()
			if !a.wrote {
				w.Header().Set("Content-Type", a.tr.ContentType())
				a.tellTrailers(w.Header())
				w.WriteHeader(http.StatusOK)
				a.wrote, a.firstByte = true, a.now()
			}
			if err := a.tr.Keepalive(w); err != nil {
				return err
			}
			if flusher != nil {
				flusher.Flush()
			}
			return nil
		})
	}()
	return func() bool {
		cancel()
		<-done
		return a.wrote
	}
}

// Respond implements Responder: the translator writes the client's bytes; the usage is the upstream
// dialect's reading of the translator's own decoding of the events or the buffered body when that dialect
// bills from its decoder (canon.Biller, translate.Translator.Billed), else the destination dialect's
// billing reads the decoded events (translate.Stream.Observe) or bodyUsage the body.
func (a *transformAttempt) Respond(ctx context.Context, w http.ResponseWriter, resp *http.Response) Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	flusher, _ := w.(http.Flusher)
	flush := func() {
		if flusher != nil {
			flusher.Flush()
		}
	}
	res := Result{}
	mode := a.tr.Mode()
	if mode == translate.ModeStream && resp.StatusCode < 300 {
		// Nothing is written before the upstream's first body byte: a break before it is a failed attempt
		// (failover, then an error in the client's dialect), not a 200 carrying an in-stream error.
		br := bufio.NewReader(resp.Body)
		if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
			res.Failed = fmt.Errorf("%w: %w", errCutBeforeFirstByte, err)
			return res
		}
		w.Header().Set("Content-Type", a.tr.ContentType())
		a.tellTrailers(w.Header())
		w.WriteHeader(http.StatusOK)
		res.Status, res.FirstByte = http.StatusOK, a.now()
		var cw *costEventWriter
		var out io.Writer = w
		if a.cost != nil && a.cost.asksStreamCost() {
			// The final usage event is told its cost (each encoder Write is one whole client event).
			cw = &costEventWriter{w: w, kind: a.class.Kind, sse: a.class.Kind != vocab.KindGammaGenerateContent || a.class.GammaSSE, ct: a.cost}
			out = cw
		}
		s := a.tr.NewStream(out)
		var text *textCollector
		switch a.cell.DestKind {
		case vocab.KindAlphaChatCompletions, vocab.KindBetaMessages:
			text = &textCollector{on: true} // the relayed text, for local counting without (output) usage
		}
		// The usage is the upstream decoder's own reading of the events (canon.Biller: every destination
		// dialect's decoder bills, each event decoded once).
		biller, bills := s.Biller()
		if bills {
			biller.ObserveHeader(resp.Header)
		}
		if cw != nil {
			cw.billed = func() (usage.Usage, bool) {
				if !bills {
					return usage.Usage{}, false
				}
				u, found, _ := biller.Billed()
				return u, found
			}
		}
		// The relayed text: a beta upstream's from the decoded events; an alpha chat upstream's is every
		// choice's content and tool-call arguments, read by alpha.ChunkText (the rule the providers' cut-stream
		// bills follow, docs/dataplane.md "Local token counting").
		chatText := text != nil && a.cell.DestKind == vocab.KindAlphaChatCompletions
		if text != nil && !chatText {
			s.CollectText(text.addString)
		}
		if chatText {
			s.Observe(func(_ string, data []byte) { text.observe(data) })
		}
		jsonArray := !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
		err := s.Pump(br, jsonArray, flush)
		switch {
		case err == nil && s.UpstreamError() == nil:
			res.End = vocab.EndCompleted
		case ctx.Err() != nil:
			res.End = vocab.EndClientDropped
		case err == nil:
			res.End = vocab.EndUpstreamError
		default:
			res.End = vocab.EndUpstreamInterrupted
		}
		if bills {
			var reported bool
			res.Usage, res.UsageFound, reported = biller.Billed()
			res.OutputUnreported = res.UsageFound && !reported
		}
		if text != nil {
			res.Output, res.OutputBytes = text.b.String(), text.total
		}
		if res.End == vocab.EndUpstreamError && (res.OutputBytes > 0 || (res.UsageFound && res.Usage.Output > 0)) {
			res.End = vocab.EndUpstreamInterrupted // an in-stream error after delivered output (docs/dataplane.md)
		}
		return res
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
	if err != nil {
		if !a.wrote {
			// Nothing reached the client: a failed attempt, like a connection error.
			res.Failed = fmt.Errorf("read upstream answer: %w", err)
			return res
		}
		res.Status, res.End = http.StatusOK, vocab.EndUpstreamInterrupted
		if ctx.Err() != nil {
			res.End = vocab.EndClientDropped
		}
		return res
	}
	// bill reads a 2xx answer's usage after the translator decoded it: the upstream dialect's reading of that
	// decoding when it bills (translate.Translator.Billed), else the body's usage read on its own.
	bill := func() {
		if resp.StatusCode >= 300 {
			return
		}
		if u, ok := a.tr.Billed(resp.Header); ok {
			res.Usage, res.UsageFound = u, true
		} else if u, found, err := bodyUsage(a.cell.DestKind, a.cell.DestOp, body, resp.Header); err == nil && found {
			res.Usage, res.UsageFound = u, true
		} else if a.cell.DestOp.IsGeneration() {
			res.Output, res.OutputBytes = responseText(body)
		}
	}
	if mode == translate.ModeSynthesize {
		if !a.wrote {
			w.Header().Set("Content-Type", a.tr.ContentType())
			a.tellTrailers(w.Header())
			w.WriteHeader(http.StatusOK)
			a.wrote = true
		}
		res.Status, res.FirstByte = http.StatusOK, a.now()
		var out io.Writer = w
		if a.cost != nil && a.cost.asksStreamCost() && resp.StatusCode < 300 {
			// The synthesised stream's final usage event is told its cost: the translator decoded the body
			// before it writes the events, so its billing (else the body's own usage) is known then.
			out = &costEventWriter{w: w, kind: a.class.Kind, sse: a.class.Kind != vocab.KindGammaGenerateContent || a.class.GammaSSE, ct: a.cost,
				billed: func() (usage.Usage, bool) {
					if u, ok := a.tr.Billed(resp.Header); ok {
						return u, true
					}
					u, found, err := bodyUsage(a.cell.DestKind, a.cell.DestOp, body, resp.Header)
					return u, found && err == nil
				}}
		}
		err := a.tr.Synthesize(out, resp.StatusCode, resp.Header, body)
		bill()
		if err != nil {
			res.End = vocab.EndClientDropped
			if ctx.Err() == nil {
				res.End = vocab.EndUpstreamError
			}
			return res
		}
		flush()
		res.End = vocab.EndCompleted
		if resp.StatusCode >= 300 {
			res.End = vocab.EndUpstreamError
		}
		return res
	}
	if resp.StatusCode >= 300 {
		cr := a.tr.Error(resp.StatusCode, resp.Header, body)
		res.Status, res.FirstByte, res.End = cr.Status, a.now(), vocab.EndUpstreamError
		a.tellHeaders(w.Header(), &res)
		writeClient(w, cr, "application/json")
		return res
	}
	out, err := a.tr.Response(body)
	bill()
	if err != nil {
		e := httperr.AllFailed(err)
		e.Message = "the upstream answer could not be translated"
		res.Refused = e
		return res
	}
	res.Status, res.FirstByte, res.End = http.StatusOK, a.now(), vocab.EndCompleted
	a.tellHeaders(w.Header(), &res)
	writeClient(w, translate.ClientResponse{Status: http.StatusOK, Body: out}, a.tr.ContentType())
	return res
}

func writeClient(w http.ResponseWriter, cr translate.ClientResponse, contentType string) {
	h := w.Header()
	for k, v := range cr.Header {
		h[k] = v
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", contentType)
	}
	h.Set("Content-Length", strconv.Itoa(len(cr.Body)))
	w.WriteHeader(cr.Status)
	_, _ = w.Write(cr.Body)
}
