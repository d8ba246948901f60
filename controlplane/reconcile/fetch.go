package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Fetcher gets report pages from a provider's admin API: 429 waits Retry-After (or a back-off) and tries
// again, 5xx, transport errors and a page cut short (a body that ends early or is not whole JSON) back off
// and try again, up to Attempts; any other status is an error at once. A page is used only when read whole.
type Fetcher struct {
	Client      *http.Client
	Attempts    int           // tries per page [5]
	BackoffBase time.Duration // first back-off, doubled per retry [500ms]
	BackoffMax  time.Duration // longest wait, Retry-After included [1m]
	MaxPage     int64         // largest page body read [32 MiB]
	// Sleep waits d or until ctx ends (tests shorten it).
	Sleep func(ctx context.Context, d time.Duration) error
}

func (f *Fetcher) defaults() Fetcher {
	o := *f
	if o.Client == nil {
		o.Client = &http.Client{Timeout: time.Minute}
	}
	if o.Attempts <= 0 {
		o.Attempts = 5
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 500 * time.Millisecond
	}
	if o.BackoffMax <= 0 {
		o.BackoffMax = time.Minute
	}
	if o.MaxPage <= 0 {
		o.MaxPage = 32 << 20
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	return o
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errPermanent marks an answer retrying cannot fix.
var errPermanent = errors.New("permanent")

// GetJSON fetches base+path?q with headers and decodes the whole JSON body into v.
func (f *Fetcher) GetJSON(ctx context.Context, base, path string, q url.Values, headers map[string]string, v any) error {
	o := f.defaults()
	u := strings.TrimSuffix(base, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var last error
	for attempt := 1; attempt <= o.Attempts; attempt++ {
		wait, err := o.try(ctx, u, headers, v)
		if err == nil {
			return nil
		}
		if errors.Is(err, errPermanent) || ctx.Err() != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		last = err
		if attempt == o.Attempts {
			break
		}
		if wait <= 0 {
			wait = o.BackoffBase << (attempt - 1)
		}
		if err := o.Sleep(ctx, min(wait, o.BackoffMax)); err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
	}
	return fmt.Errorf("GET %s: gave up after %d attempts: %w", path, o.Attempts, last)
}

// try makes one attempt; on a retryable failure it returns the wait the provider asked for (0: back off).
func (o Fetcher) try(ctx context.Context, u string, headers map[string]string, v any) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("%w: build request: %v", errPermanent, err)
	}
	for k, val := range headers {
		req.Header.Set(k, val)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := o.Client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("transport: %w", err)
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, o.MaxPage+1))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		return retryAfter(resp.Header.Get("Retry-After"), time.Now()), fmt.Errorf("rate limited (429)")
	case resp.StatusCode >= 500:
		return 0, fmt.Errorf("provider answered %d", resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return 0, fmt.Errorf("%w: provider answered %d: %.300s", errPermanent, resp.StatusCode, body)
	case readErr != nil:
		return 0, fmt.Errorf("page cut short after %d bytes: %w", len(body), readErr)
	case int64(len(body)) > o.MaxPage:
		return 0, fmt.Errorf("%w: page larger than %d bytes", errPermanent, o.MaxPage)
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return 0, fmt.Errorf("page is not whole JSON (cut short?): %w", err)
	}
	if dec.More() {
		return 0, fmt.Errorf("page has data after its JSON value")
	}
	return 0, nil
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; 0 when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// dayBuckets is one decoded page of a report in daily buckets, as walkDays reads it: each bucket's start
// and results, and the cursor of the next page.
type dayBuckets[I any] struct {
	starts   []time.Time
	results  [][]I
	hasMore  bool
	nextPage string
}

// walkDays walks every page of the report at path for [from, to), calling fn with each result and the UTC
// day of its bucket. get fetches and decodes one page for the query q; the cursor of the next page goes
// into q's "page". A bucket that is not a whole UTC day inside the window, a page that says there is more
// without a cursor, or more than 10,000 pages fail the walk: a report is taken whole or not at all.
func walkDays[I any](path string, from, to time.Time, q url.Values, get func(q url.Values) (dayBuckets[I], error), fn func(time.Time, I) error) error {
	for n := 0; ; n++ {
		if n > 10000 {
			return fmt.Errorf("%s: more than 10000 pages", path)
		}
		page, err := get(q)
		if err != nil {
			return err
		}
		for i, start := range page.starts {
			day := start.UTC()
			if !day.Equal(utcDay(day)) || day.Before(from) || !day.Before(to) {
				return fmt.Errorf("%s: bucket %s is not a UTC day of the window", path, day)
			}
			for _, it := range page.results[i] {
				if err := fn(day, it); err != nil {
					return fmt.Errorf("%s: %w", path, err)
				}
			}
		}
		if !page.hasMore {
			return nil
		}
		if page.nextPage == "" {
			return fmt.Errorf("%s: has_more without next_page", path)
		}
		q.Set("page", page.nextPage)
	}
}
