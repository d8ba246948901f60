// Package compose holds the structural test of the compose demo (compose.yaml, haproxy.cfg): no Docker
// engine is needed.
package compose

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type service struct {
	Image       string            `json:"image"`
	Build       map[string]string `json:"build"`
	Entrypoint  []string          `json:"entrypoint"`
	Command     []string          `json:"command"`
	Environment map[string]string `json:"environment"`
	Ports       []string          `json:"ports"`
	Volumes     []string          `json:"volumes"`
}

func load(t *testing.T) map[string]service {
	t.Helper()
	raw, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSONStrict(raw) // resolves anchors and merge keys; duplicate keys fail
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	var doc struct {
		Services map[string]service `json:"services"`
	}
	if err := yaml.Unmarshal(js, &doc); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return doc.Services
}

// TestComposeRunsTwoDataPlanesBehindTheBalancer: two data planes, reachable only through HAProxy, whose
// configuration health-checks exactly them on /readyz and passes `haproxy -c`; each gets only its own
// secrets; a seed service seeds the demo through the control plane.
func TestComposeRunsTwoDataPlanesBehindTheBalancer(t *testing.T) {
	svcs := load(t)
	cp, ok := svcs["controlplane"]
	if !ok {
		t.Fatal("no controlplane service")
	}
	var dps []string
	for name, s := range svcs {
		if !strings.HasPrefix(name, "dataplane") {
			continue
		}
		dps = append(dps, name)
		if len(s.Ports) > 0 {
			t.Errorf("%s publishes %v: clients must go through the load balancer", name, s.Ports)
		}
		for _, k := range []string{"TOLLGATE_ADMIN_TOKEN", "TOLLGATE_SECRET_KEY", "TOLLGATE_DATABASE_URL"} {
			if _, ok := s.Environment[k]; ok {
				t.Errorf("%s receives %s", name, k)
			}
		}
		if s.Environment["TOLLGATE_DP_TOKEN"] == "" || s.Environment["TOLLGATE_DP_TOKEN"] != cp.Environment["TOLLGATE_DP_TOKEN"] {
			t.Errorf("%s TOLLGATE_DP_TOKEN %q differs from the control plane's", name, s.Environment["TOLLGATE_DP_TOKEN"])
		}
		if s.Environment["TOLLGATE_NODE_ID"] != name || s.Environment["TOLLGATE_DP_HTTP_ADDR"] != ":8080" {
			t.Errorf("%s: node id %q, address %q", name, s.Environment["TOLLGATE_NODE_ID"], s.Environment["TOLLGATE_DP_HTTP_ADDR"])
		}
		if len(s.Build) == 0 || !slices.Equal(s.Command, []string{"serve"}) {
			t.Errorf("%s: build %v command %v", name, s.Build, s.Command)
		}
	}
	slices.Sort(dps)
	if len(dps) != 2 {
		t.Fatalf("data planes %v, want two", dps)
	}
	lb, ok := svcs["loadbalancer"]
	if !ok || !strings.HasPrefix(lb.Image, "haproxy:") || !slices.Contains(lb.Ports, "8080:8080") {
		t.Fatalf("loadbalancer = %+v, want haproxy publishing 8080", lb)
	}
	cfg, err := os.ReadFile("haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	var servers []string
	for _, m := range regexp.MustCompile(`(?m)^\s*server\s+\S+\s+(\S+):8080\s+check`).FindAllStringSubmatch(string(cfg), -1) {
		servers = append(servers, m[1])
	}
	slices.Sort(servers)
	if !slices.Equal(servers, dps) {
		t.Errorf("haproxy.cfg balances %v, want %v", servers, dps)
	}
	if !strings.Contains(string(cfg), "option httpchk GET /readyz") {
		t.Error("haproxy.cfg does not health-check /readyz")
	}
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy is not installed (Debian package haproxy; `make test` installs it: .ci/testtools)")
	}
	if out, err := exec.Command(bin, "-c", "-f", "haproxy.cfg").CombinedOutput(); err != nil {
		t.Errorf("haproxy -c -f haproxy.cfg: %v\n%s", err, out)
	}
	seed, ok := svcs["seed"]
	if !ok || !slices.Contains(seed.Command, "seed") || !slices.Contains(seed.Command, "controlplane:8081") ||
		seed.Environment["TOLLGATE_ADMIN_TOKEN"] != cp.Environment["TOLLGATE_ADMIN_TOKEN"] {
		t.Errorf("seed = %+v, want devstack seed against controlplane:8081 with the admin token", seed)
	}
}
