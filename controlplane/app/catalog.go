package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/controlplane/catalog"
)

const catalogUsage = `usage: controlplane catalog <plan|apply> [flags]

  plan    send a price catalog file to the admin API as a dry run; prints the plan (JSON) on stdout
          and a summary on stderr. Nothing changes until the plan is applied.
  apply   apply a plan by id (optionally excluding entries).

Both talk to the admin REST API (-admin-url, TOLLGATE_ADMIN_URL) with an admin token
(-token, TOLLGATE_ADMIN_TOKEN). Run "controlplane catalog <plan|apply> -h" for the flags.
`

// mapFlag collects catalog=tollgate provider mappings.
type mapFlag map[string]int64

func (m mapFlag) String() string { return fmt.Sprint(map[string]int64(m)) }

func (m mapFlag) Set(v string) error {
	name, id, ok := strings.Cut(v, "=")
	n, err := strconv.ParseInt(id, 10, 64)
	if !ok || name == "" || err != nil || n <= 0 {
		return fmt.Errorf("want <catalog provider>=<Tollgate provider id>, got %q", v)
	}
	m[name] = n
	return nil
}

// catalogCmd runs "controlplane catalog plan|apply" (GitOps: plan in review, apply the reviewed id).
func catalogCmd(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 || (args[0] != "plan" && args[0] != "apply") {
		fmt.Fprint(stderr, catalogUsage)
		return errors.New("catalog: want plan or apply")
	}
	fs := flag.NewFlagSet("catalog "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	defURL := getenv("TOLLGATE_ADMIN_URL")
	if defURL == "" {
		defURL = "http://127.0.0.1:8080"
	}
	adminURL := fs.String("admin-url", defURL, "admin REST API base URL (TOLLGATE_ADMIN_URL)")
	token := fs.String("token", getenv("TOLLGATE_ADMIN_TOKEN"), "admin token (TOLLGATE_ADMIN_TOKEN)")
	timeout := fs.Duration("timeout", 5*time.Minute, "request timeout")
	var body any
	path := "/admin/price-catalogs/" + args[0]
	switch args[0] {
	case "plan":
		format := fs.String("format", "", `catalog format: "genai-prices" or "models.dev"`)
		file := fs.String("file", "", "genai-prices: data.json; models.dev: a directory or a .tar, .tar.gz, .tgz or .zip archive")
		providers := mapFlag{}
		fs.Var(providers, "map", "map a catalog provider to a Tollgate provider: <catalog id>=<provider id> (repeatable)")
		onlyMapped := fs.Bool("only-mapped", false, "import only the entries of mapped catalog providers")
		startsWith := fs.Bool("starts-with-as-contains", false, "import genai-prices starts_with matches as contains rules")
		at := fs.String("at", "", "RFC 3339 time that picks dated catalog prices (default: now)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		req := map[string]any{"format": *format, "provider_map": map[string]int64(providers), "only_mapped": *onlyMapped,
			"starts_with_as_contains": *startsWith}
		if *at != "" {
			if _, err := time.Parse(time.RFC3339, *at); err != nil {
				return fmt.Errorf("catalog plan: -at: %w", err)
			}
			req["at"] = *at
		}
		if *file == "" {
			return errors.New("catalog plan: -file is required")
		}
		switch *format {
		case catalog.FormatGenAIPrices:
			b, err := os.ReadFile(*file)
			if err != nil {
				return fmt.Errorf("catalog plan: %w", err)
			}
			req["document"] = string(b)
		case catalog.FormatModelsDev:
			files, err := catalog.ReadTree(*file)
			if err != nil {
				return fmt.Errorf("catalog plan: %w", err)
			}
			text := make(map[string]string, len(files))
			for p, b := range files {
				text[p] = string(b)
			}
			req["files"] = text
		default:
			return fmt.Errorf("catalog plan: -format must be %q or %q", catalog.FormatGenAIPrices, catalog.FormatModelsDev)
		}
		body = req
	case "apply":
		planID := fs.String("plan-id", "", "id of the plan to apply")
		exclude := fs.String("exclude", "", "comma-separated entry ids of the plan not to apply")
		confirm := fs.Bool("confirm-operator-edited", false, "allow overwriting rules an operator created or edited")
		effectiveAt := fs.String("effective-at", "", "RFC 3339 instant the plan's changes take effect at (default: now)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *planID == "" {
			return errors.New("catalog apply: -plan-id is required")
		}
		req := map[string]any{"plan_id": *planID, "confirm_operator_edited": *confirm}
		if *effectiveAt != "" {
			at, err := time.Parse(time.RFC3339Nano, *effectiveAt)
			if err != nil {
				return fmt.Errorf("catalog apply: -effective-at: %w", err)
			}
			req["effective_at"] = at
		}
		if *exclude != "" {
			req["exclude"] = strings.Split(*exclude, ",")
		}
		body = req
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("catalog %s: unexpected arguments %v", args[0], fs.Args())
	}
	if *token == "" {
		return fmt.Errorf("catalog %s: an admin token is required (-token or TOLLGATE_ADMIN_TOKEN)", args[0])
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(*adminURL, "/")+path, bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("catalog %s: %w", args[0], err)
	}
	req.Header.Set("Authorization", "Bearer "+*token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("catalog %s: %w", args[0], err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("catalog %s: read answer: %w", args[0], err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("catalog %s: admin API answered %s: %s", args[0], resp.Status, bytes.TrimSpace(out))
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, out, "", "  "); err != nil {
		return fmt.Errorf("catalog %s: answer is not JSON: %w", args[0], err)
	}
	pretty.WriteByte('\n')
	if _, err := stdout.Write(pretty.Bytes()); err != nil {
		return err
	}
	if args[0] == "plan" {
		summarisePlan(stderr, out)
	}
	return nil
}

// summarisePlan writes a short human summary of a plan answer.
func summarisePlan(w io.Writer, raw []byte) {
	var p struct {
		ID      string         `json:"id"`
		Entries int            `json:"entries"`
		Summary map[string]int `json:"summary"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	keys := make([]string, 0, len(p.Summary))
	for k := range p.Summary {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, p.Summary[k]))
	}
	fmt.Fprintf(w, "plan %s: %d catalog entries: %s\napply with: controlplane catalog apply -plan-id %s\n", p.ID, p.Entries, strings.Join(parts, ", "), p.ID)
}
