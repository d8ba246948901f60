package batch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/controlplane/store"
)

// Limits of what the watcher reads from a provider.
const (
	// MaxLineBytes is the longest result line read (one response body with its envelope). A longer line
	// fails the read: the batch is retried later and its last_error says why.
	MaxLineBytes = 32 << 20
	// maxStatusBytes bounds a batch status answer; gamma's carries inlined responses (its inlined input
	// is limited to 20 MB by the provider).
	maxStatusBytes = 64 << 20
	// betaVersion is the beta API version header the watcher sends.
	betaVersion = "2023-06-01"
)

// State is what one status call learned of a batch at its provider.
type State struct {
	Status         string // store.BatchValidating … store.BatchEnded
	Outcome        string // with BatchEnded: store.OutcomeCompleted …
	ProviderStatus string // the provider's own word
	EndedAt        *time.Time

	files      []string          // alpha: output and error file ids; gamma: the responses file
	resultsURL string            // beta
	inline     []json.RawMessage // gamma inlined responses
}

// Line is one result line.
type Line struct {
	CustomID   string
	State      string // store.LineSucceeded, LineErrored, LineExpired, LineCancelled
	HTTPStatus int32
	// Body is the line's response body (the answer a single request would have had), when it has one.
	Body []byte
}

// provider speaks one dialect's batch API with one credential.
type provider interface {
	status(ctx context.Context, id string) (State, error)
	results(ctx context.Context, id string, st State, fn func(Line) error) error
}

// client is the HTTP side every dialect shares: the base URL, the credential's headers, bounded reads.
type client struct {
	http    *http.Client
	base    *url.URL
	channel string
	secret  string
}

func newProvider(hc *http.Client, dialect, baseURL, channel, secret string) (provider, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("provider base url %q is not an http(s) URL", baseURL)
	}
	c := &client{http: hc, base: u, channel: channel, secret: secret}
	switch dialect {
	case "alpha":
		return alphaProvider{c}, nil
	case "beta":
		return betaProvider{c}, nil
	case "gamma":
		return gammaProvider{c}, nil
	}
	return nil, fmt.Errorf("unknown batch dialect %q", dialect)
}

// url joins the base URL with a path (already escaped) and a query.
func (c *client) url(path, query string) string {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = query
	return u.String()
}

// sameOrigin reports whether raw points at the provider's own scheme and host: only there does the watcher
// send the credential (a results_url elsewhere is not followed).
func (c *client) sameOrigin(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == c.base.Scheme && u.Host == c.base.Host
}

// get performs a GET with the credential and answers the body of a 2xx answer; any other status is an error
// naming it with the start of the body.
func (c *client) get(ctx context.Context, target string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("batch request: %w", err)
	}
	switch c.channel {
	case "beta":
		req.Header.Set("X-Api-Key", c.secret)
		req.Header.Set("Anthropic-Version", betaVersion)
	case "gamma":
		req.Header.Set("X-Goog-Api-Key", c.secret)
	default:
		req.Header.Set("Authorization", "Bearer "+c.secret)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", req.URL.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		head, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: status %d: %s", req.URL.Path, resp.StatusCode, bytes.TrimSpace(head))
	}
	return resp.Body, nil
}

// getJSON decodes a bounded JSON answer into v.
func (c *client) getJSON(ctx context.Context, target string, limit int64, v any) error {
	body, err := c.get(ctx, target)
	if err != nil {
		return err
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", target, err)
	}
	if int64(len(data)) > limit {
		return fmt.Errorf("answer of %s is longer than %d bytes", target, limit)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode answer of %s: %w", target, err)
	}
	return nil
}

// readJSONL calls fn with every non-blank line of r, reading one line at a time with at most MaxLineBytes
// held: memory stays bounded whatever the file's size.
func readJSONL(r io.Reader, fn func([]byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(buf)+len(frag) > MaxLineBytes {
			return fmt.Errorf("a result line is longer than %d bytes", MaxLineBytes)
		}
		buf = append(buf, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if line := bytes.TrimSpace(buf); len(line) > 0 {
			if ferr := fn(line); ferr != nil {
				return ferr
			}
		}
		buf = buf[:0]
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read results: %w", err)
		}
	}
}

// streamFile GETs a JSONL file and calls fn per line.
func (c *client) streamFile(ctx context.Context, target string, fn func([]byte) error) error {
	body, err := c.get(ctx, target)
	if err != nil {
		return err
	}
	defer body.Close()
	return readJSONL(body, fn)
}

func unixTime(s *int64) *time.Time {
	if s == nil || *s <= 0 {
		return nil
	}
	t := time.Unix(*s, 0).UTC()
	return &t
}

// alphaProvider: GET /v1/batches/{id}; results in the output and error files, GET /v1/files/{id}/content.
type alphaProvider struct{ c *client }

type alphaBatch struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	OutputFileID string `json:"output_file_id"`
	ErrorFileID  string `json:"error_file_id"`
	CompletedAt  *int64 `json:"completed_at"`
	FailedAt     *int64 `json:"failed_at"`
	ExpiredAt    *int64 `json:"expired_at"`
	CancelledAt  *int64 `json:"cancelled_at"`
}

func (p alphaProvider) status(ctx context.Context, id string) (State, error) {
	var b alphaBatch
	if err := p.c.getJSON(ctx, p.c.url("/v1/batches/"+url.PathEscape(id), ""), 1<<20, &b); err != nil {
		return State{}, err
	}
	st := State{ProviderStatus: b.Status}
	switch b.Status {
	case "validating":
		st.Status = store.BatchValidating
	case "in_progress", "cancelling":
		st.Status = store.BatchInProgress
	case "finalizing":
		st.Status = store.BatchFinalizing
	case "completed":
		st.Status, st.Outcome, st.EndedAt = store.BatchEnded, store.OutcomeCompleted, unixTime(b.CompletedAt)
	case "failed":
		st.Status, st.Outcome, st.EndedAt = store.BatchEnded, store.OutcomeFailed, unixTime(b.FailedAt)
	case "expired":
		st.Status, st.Outcome, st.EndedAt = store.BatchEnded, store.OutcomeExpired, unixTime(b.ExpiredAt)
	case "cancelled":
		st.Status, st.Outcome, st.EndedAt = store.BatchEnded, store.OutcomeCancelled, unixTime(b.CancelledAt)
	default:
		return State{}, fmt.Errorf("alpha batch %s: unknown status %.40q", id, b.Status)
	}
	for _, f := range []string{b.OutputFileID, b.ErrorFileID} {
		if f != "" {
			st.files = append(st.files, f)
		}
	}
	return st, nil
}

type alphaLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int32           `json:"status_code"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

func (p alphaProvider) results(ctx context.Context, id string, st State, fn func(Line) error) error {
	for _, f := range st.files {
		err := p.c.streamFile(ctx, p.c.url("/v1/files/"+url.PathEscape(f)+"/content", ""), func(raw []byte) error {
			var l alphaLine
			if err := json.Unmarshal(raw, &l); err != nil {
				return fmt.Errorf("alpha batch %s: result line: %w", id, err)
			}
			line := Line{CustomID: l.CustomID, State: store.LineErrored}
			if l.Response != nil {
				line.HTTPStatus, line.Body = l.Response.StatusCode, l.Response.Body
			}
			switch {
			case l.Error != nil && l.Error.Code == "batch_expired":
				line.State = store.LineExpired
			case l.Error != nil && l.Error.Code == "batch_cancelled":
				line.State = store.LineCancelled
			case l.Error == nil && l.Response != nil && l.Response.StatusCode/100 == 2:
				line.State = store.LineSucceeded
			}
			return fn(line)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// betaProvider: GET /v1/messages/batches/{id}; results at results_url (JSONL).
type betaProvider struct{ c *client }

type betaBatch struct {
	ID                string     `json:"id"`
	ProcessingStatus  string     `json:"processing_status"`
	EndedAt           *time.Time `json:"ended_at"`
	CancelInitiatedAt *time.Time `json:"cancel_initiated_at"`
	ResultsURL        *string    `json:"results_url"`
	RequestCounts     struct {
		Succeeded int64 `json:"succeeded"`
		Errored   int64 `json:"errored"`
		Canceled  int64 `json:"canceled"`
		Expired   int64 `json:"expired"`
	} `json:"request_counts"`
}

func (p betaProvider) status(ctx context.Context, id string) (State, error) {
	var b betaBatch
	if err := p.c.getJSON(ctx, p.c.url("/v1/messages/batches/"+url.PathEscape(id), ""), 1<<20, &b); err != nil {
		return State{}, err
	}
	st := State{ProviderStatus: b.ProcessingStatus}
	switch b.ProcessingStatus {
	case "in_progress", "canceling":
		st.Status = store.BatchInProgress
	case "ended":
		st.Status, st.EndedAt = store.BatchEnded, b.EndedAt
		switch {
		case b.CancelInitiatedAt != nil:
			st.Outcome = store.OutcomeCancelled
		case b.RequestCounts.Expired > 0:
			st.Outcome = store.OutcomeExpired
		default:
			st.Outcome = store.OutcomeCompleted
		}
		// The credential goes only to the provider's own origin; elsewhere, the documented path.
		st.resultsURL = p.c.url("/v1/messages/batches/"+url.PathEscape(id)+"/results", "")
		if b.ResultsURL != nil && p.c.sameOrigin(*b.ResultsURL) {
			st.resultsURL = *b.ResultsURL
		}
	default:
		return State{}, fmt.Errorf("beta batch %s: unknown processing_status %.40q", id, b.ProcessingStatus)
	}
	return st, nil
}

type betaLine struct {
	CustomID string `json:"custom_id"`
	Result   struct {
		Type    string          `json:"type"`
		Message json.RawMessage `json:"message"`
	} `json:"result"`
}

func (p betaProvider) results(ctx context.Context, id string, st State, fn func(Line) error) error {
	if st.resultsURL == "" {
		return nil
	}
	return p.c.streamFile(ctx, st.resultsURL, func(raw []byte) error {
		var l betaLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("beta batch %s: result line: %w", id, err)
		}
		line := Line{CustomID: l.CustomID}
		switch l.Result.Type {
		case "succeeded":
			line.State, line.HTTPStatus, line.Body = store.LineSucceeded, http.StatusOK, l.Result.Message
		case "errored":
			line.State = store.LineErrored
		case "canceled":
			line.State = store.LineCancelled
		case "expired":
			line.State = store.LineExpired
		default:
			return fmt.Errorf("beta batch %s: line %.60q: unknown result type %.40q", id, l.CustomID, l.Result.Type)
		}
		return fn(line)
	})
}

// gammaProvider: GET /v1beta/{batches/…} (a long-running operation); results inlined in it or in a responses
// file, GET /download/v1beta/{files/…}:download?alt=media.
type gammaProvider struct{ c *client }

// gammaName is a resource name the watcher puts in a path: batches/… or files/… of URL-safe characters.
var gammaName = regexp.MustCompile(`^(batches|files)/[A-Za-z0-9_-]{1,200}$`)

type gammaOutput struct {
	ResponsesFile    string `json:"responsesFile"`
	InlinedResponses *struct {
		InlinedResponses []json.RawMessage `json:"inlinedResponses"`
	} `json:"inlinedResponses"`
}

type gammaOperation struct {
	Name     string `json:"name"`
	Done     bool   `json:"done"`
	Metadata struct {
		State   string       `json:"state"`
		EndTime *time.Time   `json:"endTime"`
		Output  *gammaOutput `json:"output"`
	} `json:"metadata"`
	Response *gammaOutput `json:"response"`
}

func (p gammaProvider) status(ctx context.Context, id string) (State, error) {
	if !gammaName.MatchString(id) || !strings.HasPrefix(id, "batches/") {
		return State{}, fmt.Errorf("gamma batch name %.80q is not batches/<id>", id)
	}
	var op gammaOperation
	if err := p.c.getJSON(ctx, p.c.url("/v1beta/"+id, ""), maxStatusBytes, &op); err != nil {
		return State{}, err
	}
	st := State{ProviderStatus: op.Metadata.State}
	switch op.Metadata.State {
	case "BATCH_STATE_PENDING", "BATCH_STATE_UNSPECIFIED", "":
		st.Status = store.BatchValidating
	case "BATCH_STATE_RUNNING":
		st.Status = store.BatchInProgress
	case "BATCH_STATE_SUCCEEDED":
		st.Status, st.Outcome = store.BatchEnded, store.OutcomeCompleted
	case "BATCH_STATE_FAILED":
		st.Status, st.Outcome = store.BatchEnded, store.OutcomeFailed
	case "BATCH_STATE_CANCELLED":
		st.Status, st.Outcome = store.BatchEnded, store.OutcomeCancelled
	case "BATCH_STATE_EXPIRED":
		st.Status, st.Outcome = store.BatchEnded, store.OutcomeExpired
	default:
		return State{}, fmt.Errorf("gamma batch %s: unknown state %.40q", id, op.Metadata.State)
	}
	if st.Status != store.BatchEnded {
		return st, nil
	}
	st.EndedAt = op.Metadata.EndTime
	out := op.Response
	if out == nil {
		out = op.Metadata.Output
	}
	if out != nil {
		if out.ResponsesFile != "" {
			st.files = []string{out.ResponsesFile}
		}
		if out.InlinedResponses != nil {
			st.inline = out.InlinedResponses.InlinedResponses
		}
	}
	return st, nil
}

type gammaLine struct {
	Key      string          `json:"key"`
	Response json.RawMessage `json:"response"`
	Error    json.RawMessage `json:"error"`
	Metadata struct {
		Key string `json:"key"`
	} `json:"metadata"`
}

func (l gammaLine) line(customID string) Line {
	out := Line{CustomID: customID, State: store.LineErrored}
	if len(l.Response) > 0 && !bytes.Equal(l.Response, []byte("null")) && (len(l.Error) == 0 || bytes.Equal(l.Error, []byte("null"))) {
		out.State, out.HTTPStatus, out.Body = store.LineSucceeded, http.StatusOK, l.Response
	}
	return out
}

func (p gammaProvider) results(ctx context.Context, id string, st State, fn func(Line) error) error {
	for i, raw := range st.inline {
		var l gammaLine
		if err := json.Unmarshal(raw, &l); err != nil {
			return fmt.Errorf("gamma batch %s: inlined response %d: %w", id, i, err)
		}
		key := l.Metadata.Key
		if key == "" {
			key = strconv.Itoa(i)
		}
		if err := fn(l.line(key)); err != nil {
			return err
		}
	}
	for _, f := range st.files {
		if !gammaName.MatchString(f) || !strings.HasPrefix(f, "files/") {
			return fmt.Errorf("gamma batch %s: responses file %.80q is not files/<id>", id, f)
		}
		n := 0
		err := p.c.streamFile(ctx, p.c.url("/download/v1beta/"+f+":download", "alt=media"), func(raw []byte) error {
			var l gammaLine
			if err := json.Unmarshal(raw, &l); err != nil {
				return fmt.Errorf("gamma batch %s: result line %d: %w", id, n, err)
			}
			key := l.Key
			if key == "" {
				key = strconv.Itoa(n)
			}
			n++
			return fn(l.line(key))
		})
		if err != nil {
			return err
		}
	}
	return nil
}
