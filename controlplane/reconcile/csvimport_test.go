package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/shared/pricing"
)

const sampleCSV = `day,model,key_ref,project_ref,tier,input_tokens,output_tokens,cache_read_tokens,requests,cost
2026-12-05,m-1,key_1,proj_1,default,1000,200,50,3,0.0123
2026-12-06,m-1,key_1,proj_1,default,10,2,,1,0.0000001
2026-12-06,img-1,key_1,proj_1,,,,,4,1.5
`

func TestParseCSV(t *testing.T) {
	rep, err := ParseCSV(strings.NewReader(sampleCSV))
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Usage) != 3 || len(rep.Costs) != 3 {
		t.Fatalf("rows %d/%d, want 3/3", len(rep.Usage), len(rep.Costs))
	}
	u := rep.Usage[0]
	if u.Tokens != (Tokens{Input: 1000, Output: 200, CacheRead: 50}) || u.Requests != 3 || u.KeyRef != "key_1" || u.Tier != "default" || !u.TokensReported {
		t.Fatalf("row 1 = %+v", u)
	}
	if rep.Usage[2].TokensReported || rep.Usage[2].Requests != 4 {
		t.Fatalf("a row without token columns must report requests and cost only: %+v", rep.Usage[2])
	}
	if got := pricing.FormatDecimal(rep.Costs[1].Cost); got != "0.0000001" {
		t.Fatalf("cost kept exactly: %s", got)
	}
	if !rep.From.Equal(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)) || !rep.To.Equal(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("window %s–%s", rep.From, rep.To)
	}
	imp := &CSV{Report: rep}
	day6, err := imp.Import(context.Background(), rep.From.Add(Day), rep.To)
	if err != nil || len(day6.Usage) != 2 {
		t.Fatalf("import of 2026-12-06: %d rows, %v", len(day6.Usage), err)
	}
}

// The three cache-write lifetimes are columns of their own: a 30-minute write is neither a 5-minute nor a
// 1-hour one.
func TestParseCSVKeepsTheThreeCacheWriteCategoriesApart(t *testing.T) {
	rep, err := ParseCSV(strings.NewReader("day,model,cache_creation_5m_tokens,cache_creation_30m_tokens,cache_creation_1h_tokens,cost\n" +
		"2026-12-05,m-1,5,30,60,0.1\n2026-12-05,m-2,,16,,0.2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Usage[0].Tokens; got != (Tokens{Cache5m: 5, Cache30m: 30, Cache1h: 60}) || got.Total() != 95 {
		t.Fatalf("row 1 = %+v", got)
	}
	if u := rep.Usage[1]; u.Tokens != (Tokens{Cache30m: 16}) || !u.TokensReported {
		t.Fatalf("a row with only 30-minute writes = %+v", u)
	}
	var names []string
	for _, c := range rep.Usage[1].Tokens.Categories() {
		if c.Value != 0 {
			names = append(names, c.Name)
		}
	}
	if strings.Join(names, ",") != "cache_creation_30m" {
		t.Fatalf("categories with a value: %v", names)
	}
}

func TestParseCSVRefusesMalformedFiles(t *testing.T) {
	for name, in := range map[string]string{
		"no cost column":  "day,model\n2026-12-05,m-1\n",
		"unknown column":  "day,model,cost,colour\n2026-12-05,m-1,1,red\n",
		"bad day":         "day,model,cost\n05/12/2026,m-1,1\n",
		"negative tokens": "day,model,cost,input_tokens\n2026-12-05,m-1,1,-3\n",
		"float cost":      "day,model,cost\n2026-12-05,m-1,1e3\n",
		"negative cost":   "day,model,cost\n2026-12-05,m-1,-1\n",
		"empty model":     "day,model,cost\n2026-12-05,,1\n",
		"no rows":         "day,model,cost\n",
		"ragged":          "day,model,cost\n2026-12-05,m-1\n",
	} {
		if _, err := ParseCSV(strings.NewReader(in)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParseCSV(f *testing.F) {
	f.Add(sampleCSV)
	f.Add("day,model,cost\n2026-12-05,m-1,0\n")
	f.Add("day,model,cache_creation_30m_tokens,cost\n2026-12-05,m-1,16,0.00004\n")
	f.Add("\ufeffday,model,cost,requests\n2026-12-05,\"m,1\",1.5,2\n")
	f.Fuzz(func(t *testing.T, in string) {
		rep, err := ParseCSV(strings.NewReader(in))
		if err != nil {
			return
		}
		if len(rep.Usage) == 0 || len(rep.Usage) != len(rep.Costs) || !rep.To.After(rep.From) {
			t.Fatalf("accepted report is inconsistent: %+v", rep)
		}
		for i, u := range rep.Usage {
			for _, c := range u.Tokens.Categories() {
				if c.Value < 0 {
					t.Fatalf("negative %s accepted", c.Name)
				}
			}
			if u.Model == "" || rep.Costs[i].Cost.Sign() < 0 || u.Day.Before(rep.From) || !u.Day.Before(rep.To) {
				t.Fatalf("row %d accepted: %+v cost %v", i, u, rep.Costs[i].Cost)
			}
		}
	})
}
