package reconcile

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/shared/pricing"
)

// CSVColumns are the columns of the file import (docs/reconciliation.md, "File import"); the header row
// names them, in any order; day, model and cost are required, the rest default to empty or 0.
var CSVColumns = []string{"day", "key_ref", "project_ref", "model", "tier", "input_tokens", "output_tokens",
	"cache_read_tokens", "cache_creation_5m_tokens", "cache_creation_30m_tokens", "cache_creation_1h_tokens",
	"image_output_tokens", "requests", "cost"}

// maxCSVRows bounds one file.
const maxCSVRows = 1_000_000

// ParseCSV reads a usage and cost export: one row per day and group, tokens per category and the cost in
// dollars (an exact decimal). A row whose token columns are all empty reports cost (and requests) only.
// Any malformed row fails the whole file.
func ParseCSV(r io.Reader) (Report, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = false
	head, err := cr.Read()
	if err != nil {
		return Report{}, fmt.Errorf("csv header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		h = strings.TrimSpace(strings.ToLower(strings.TrimPrefix(h, "\ufeff")))
		if !isCSVColumn(h) {
			return Report{}, fmt.Errorf("csv header: unknown column %q", h)
		}
		if _, dup := col[h]; dup {
			return Report{}, fmt.Errorf("csv header: column %q twice", h)
		}
		col[h] = i
	}
	for _, req := range []string{"day", "model", "cost"} {
		if _, ok := col[req]; !ok {
			return Report{}, fmt.Errorf("csv header: column %q is required", req)
		}
	}
	var rep Report
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Report{}, fmt.Errorf("csv: %w", err)
		}
		if line > maxCSVRows+1 {
			return Report{}, fmt.Errorf("csv: more than %d rows", maxCSVRows)
		}
		get := func(name string) string {
			if i, ok := col[name]; ok && i < len(rec) {
				return strings.TrimSpace(rec[i])
			}
			return ""
		}
		day, err := time.Parse(time.DateOnly, get("day"))
		if err != nil {
			return Report{}, fmt.Errorf("csv line %d: day: %w", line, err)
		}
		row := UsageRow{Day: day, KeyRef: get("key_ref"), ProjectRef: get("project_ref"), Model: get("model"), Tier: get("tier")}
		if row.Model == "" {
			return Report{}, fmt.Errorf("csv line %d: model is empty", line)
		}
		counts := []*int64{&row.Tokens.Input, &row.Tokens.Output, &row.Tokens.CacheRead, &row.Tokens.Cache5m,
			&row.Tokens.Cache30m, &row.Tokens.Cache1h, &row.Tokens.ImageOut, &row.Requests}
		for i, name := range []string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_5m_tokens",
			"cache_creation_30m_tokens", "cache_creation_1h_tokens", "image_output_tokens", "requests"} {
			v := get(name)
			if v == "" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return Report{}, fmt.Errorf("csv line %d: %s must be a non-negative integer, got %q", line, name, v)
			}
			*counts[i] = n
			row.TokensReported = row.TokensReported || name != "requests"
		}
		cost, err := pricing.ParseDecimal(get("cost"))
		if err != nil || cost.Sign() < 0 {
			return Report{}, fmt.Errorf("csv line %d: cost must be a non-negative decimal, got %q", line, get("cost"))
		}
		rep.Usage = append(rep.Usage, row)
		rep.Costs = append(rep.Costs, CostRow{Day: day, ProjectRef: row.ProjectRef, Model: row.Model, Cost: cost})
		if rep.From.IsZero() || day.Before(rep.From) {
			rep.From = day
		}
		if end := day.Add(Day); end.After(rep.To) {
			rep.To = end
		}
	}
	if len(rep.Usage) == 0 {
		return Report{}, errors.New("csv: no rows")
	}
	return rep, nil
}

func isCSVColumn(h string) bool {
	for _, c := range CSVColumns {
		if c == h {
			return true
		}
	}
	return false
}

// CSV is a file import as an Importer: the parsed file, cut to the window asked for.
type CSV struct{ Report Report }

// Kind implements Importer.
func (c *CSV) Kind() string { return KindCSV }

// Import implements Importer.
func (c *CSV) Import(_ context.Context, from, to time.Time) (Report, error) {
	if err := checkWindow(from, to); err != nil {
		return Report{}, err
	}
	out := Report{From: from, To: to}
	for _, u := range c.Report.Usage {
		if !u.Day.Before(from) && u.Day.Before(to) {
			out.Usage = append(out.Usage, u)
		}
	}
	for _, k := range c.Report.Costs {
		if !k.Day.Before(from) && k.Day.Before(to) {
			out.Costs = append(out.Costs, k)
		}
	}
	return out, nil
}
