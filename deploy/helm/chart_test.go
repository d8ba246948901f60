// Package helm holds the test that renders the Tollgate Helm chart (deploy/helm/tollgate) with the real
// Helm engine and decodes every object strictly into the official Kubernetes API types.
package helm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "tollgate"

// serviceMonitor is the subset of the Prometheus Operator's ServiceMonitor (a CRD, not in k8s.io/api) the
// chart writes; decoding it strictly still catches misspelt fields.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
			Scheme   string `json:"scheme"`
			// TLSConfig is the operator's SafeTLSConfig, passed through from values.
			TLSConfig map[string]any `json:"tlsConfig"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// kinds maps apiVersion/kind to a new value of its official type.
var kinds = map[string]func() any{
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &serviceMonitor{} },
}

// rendered is every object of one rendering, by "Kind/name".
type rendered map[string]any

// render renders the chart with the values files (none: the chart's defaults) through Helm's engine,
// as `helm template` does, and decodes each object strictly.
func render(t *testing.T, valuesFiles ...string) rendered {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	out, err := renderErr(ch, valuesFiles...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func renderErr(ch *chart.Chart, valuesFiles ...string) (rendered, error) {
	vals := map[string]any{}
	for _, f := range valuesFiles {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return nil, fmt.Errorf("values %s: %w", f, err)
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.32.0", Major: "1", Minor: "32"}
	top, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "tg", Namespace: "tollgate", IsInstall: true}, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	objs := rendered{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for i, doc := range strings.Split(files[name], "\n---") {
			if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" || isComment(doc) {
				continue
			}
			key, obj, err := decodeStrict([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("%s document %d: %w\n%s", name, i, err, doc)
			}
			if _, dup := objs[key]; dup {
				return nil, fmt.Errorf("%s rendered twice", key)
			}
			objs[key] = obj
		}
	}
	return objs, nil
}

func isComment(doc string) bool {
	for _, l := range strings.Split(doc, "\n") {
		if l = strings.TrimSpace(l); l != "" && l != "---" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// decodeStrict decodes one YAML object into its official type; unknown kinds, unknown fields and
// duplicate keys are errors.
func decodeStrict(doc []byte) (string, any, error) {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return "", nil, err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(js, &tm); err != nil {
		return "", nil, err
	}
	newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return "", nil, fmt.Errorf("unknown kind %s %s", tm.APIVersion, tm.Kind)
	}
	obj := newObj()
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return "", nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	name := obj.(metav1.Object).GetName()
	if name == "" {
		return "", nil, fmt.Errorf("%s without a name", tm.Kind)
	}
	return tm.Kind + "/" + name, obj, nil
}

func get[T any](t *testing.T, objs rendered, key string) T {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		t.Fatalf("%s not rendered (have %v)", key, slices.Sorted(maps.Keys(objs)))
	}
	return o.(T)
}

func TestChartRendersStrictlyWithDefaultsAndProductionValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		files  []string
		secret map[string]string // component -> Secret name the pods use
		extra  []string          // objects only this rendering has
	}{
		{name: "defaults", secret: map[string]string{"controlplane": "tg-tollgate-controlplane", "dataplane": "tg-tollgate-dataplane"},
			extra: []string{"Secret/tg-tollgate-controlplane", "Secret/tg-tollgate-dataplane"}},
		{name: "production", files: []string{chartDir + "/values-production.yaml"},
			secret: map[string]string{"controlplane": "tollgate-controlplane", "dataplane": "tollgate-dataplane"},
			extra:  []string{"ServiceMonitor/tg-tollgate-controlplane", "ServiceMonitor/tg-tollgate-dataplane"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := render(t, tc.files...)
			for _, k := range append([]string{"Deployment/tg-tollgate-controlplane", "Deployment/tg-tollgate-dataplane",
				"Service/tg-tollgate-controlplane", "Service/tg-tollgate-dataplane", "PodDisruptionBudget/tg-tollgate-controlplane",
				"PodDisruptionBudget/tg-tollgate-dataplane", "HorizontalPodAutoscaler/tg-tollgate-dataplane",
				"NetworkPolicy/tg-tollgate-controlplane", "NetworkPolicy/tg-tollgate-dataplane"}, tc.extra...) {
				get[any](t, objs, k)
			}
			cp := get[*appsv1.Deployment](t, objs, "Deployment/tg-tollgate-controlplane")
			dp := get[*appsv1.Deployment](t, objs, "Deployment/tg-tollgate-dataplane")
			if cp.Spec.Replicas == nil || *cp.Spec.Replicas < 2 {
				t.Errorf("control plane replicas = %v, want >= 2", cp.Spec.Replicas)
			}
			for _, d := range []*appsv1.Deployment{cp, dp} {
				checkPod(t, d, tc.secret[d.Spec.Template.Labels["app.kubernetes.io/component"]])
			}
			// The data plane is handed no admin token, secret key or database URL, by any route.
			for _, c := range dp.Spec.Template.Spec.Containers {
				for _, e := range c.Env {
					if forbiddenForDP(e.Name) || (e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == tc.secret["controlplane"]) {
						t.Errorf("data plane env %s: control-plane secret material", e.Name)
					}
				}
				for _, ef := range c.EnvFrom {
					if ef.SecretRef == nil || ef.SecretRef.Name != tc.secret["dataplane"] {
						t.Errorf("data plane envFrom %+v, want only the data-plane secret %s", ef, tc.secret["dataplane"])
					}
				}
			}
			if s, ok := objs["Secret/tg-tollgate-dataplane"].(*corev1.Secret); ok {
				for k := range s.StringData {
					if forbiddenForDP(k) {
						t.Errorf("data-plane Secret holds %s", k)
					}
				}
				cs := get[*corev1.Secret](t, objs, "Secret/tg-tollgate-controlplane")
				if cs.StringData["TOLLGATE_DP_TOKEN"] != s.StringData["TOLLGATE_DP_TOKEN"] {
					t.Error("the two Secrets' TOLLGATE_DP_TOKEN differ")
				}
			}
			// Selectors of Services, PDBs, NetworkPolicies and the HPA point at the pods.
			pods := map[string]map[string]string{"controlplane": cp.Spec.Template.Labels, "dataplane": dp.Spec.Template.Labels}
			for key, o := range objs {
				var sel map[string]string
				switch v := o.(type) {
				case *corev1.Service:
					sel = v.Spec.Selector
				case *policyv1.PodDisruptionBudget:
					sel = v.Spec.Selector.MatchLabels
				case *networkingv1.NetworkPolicy:
					sel = v.Spec.PodSelector.MatchLabels
				case *autoscalingv2.HorizontalPodAutoscaler:
					if v.Spec.ScaleTargetRef.Kind != "Deployment" || v.Spec.ScaleTargetRef.Name != dp.Name {
						t.Errorf("%s targets %+v, want the data-plane Deployment", key, v.Spec.ScaleTargetRef)
					}
					continue
				default:
					continue
				}
				if !selects(sel, pods[sel["app.kubernetes.io/component"]]) {
					t.Errorf("%s selector %v matches no pods", key, sel)
				}
			}
			checkTLS(t, cp, dp, tc.name == "production")
			// The client port serves TLS; the separate metrics port (dataPlane.metricsPort, on in production)
			// is plain HTTP, reachable only from the monitoring namespace.
			if sm, ok := objs["ServiceMonitor/tg-tollgate-dataplane"].(*serviceMonitor); ok {
				want := "https"
				if sm.Spec.Endpoints[0].Port == "metrics" {
					want = ""
				}
				if sm.Spec.Endpoints[0].Scheme != want {
					t.Errorf("the data plane's ServiceMonitor scrapes port %s with scheme %q, want %q",
						sm.Spec.Endpoints[0].Port, sm.Spec.Endpoints[0].Scheme, want)
				}
			}
			if dp.Spec.Template.Spec.TopologySpreadConstraints == nil {
				t.Error("data plane without topology spread constraints")
			}
		})
	}
}

// checkTLS: with the production values every listener serves TLS from a mounted Secret, the control
// plane requires the data planes' client certificates, the data planes trust the control plane's CA and
// present theirs, and the probes speak HTTPS; with the defaults nothing is TLS.
func checkTLS(t *testing.T, cp, dp *appsv1.Deployment, want bool) {
	t.Helper()
	for _, tc := range []struct {
		d   *appsv1.Deployment
		env []string
	}{
		{cp, []string{"TOLLGATE_CP_TLS_CERT", "TOLLGATE_CP_TLS_KEY", "TOLLGATE_CP_TLS_CLIENT_CA", "TOLLGATE_CP_HTTP_TLS_CERT", "TOLLGATE_CP_HTTP_TLS_KEY"}},
		{dp, []string{"TOLLGATE_CP_CA_FILE", "TOLLGATE_CP_CLIENT_CERT", "TOLLGATE_CP_CLIENT_KEY", "TOLLGATE_DP_TLS_CERT", "TOLLGATE_DP_TLS_KEY"}},
	} {
		c := tc.d.Spec.Template.Spec.Containers[0]
		mounted := map[string]bool{}
		for _, m := range c.VolumeMounts {
			mounted[m.MountPath] = m.ReadOnly
		}
		for _, name := range tc.env {
			var path string
			for _, e := range c.Env {
				if e.Name == name {
					path = e.Value
				}
			}
			switch {
			case want && (path == "" || !mounted[path[:strings.LastIndex(path, "/")]]):
				t.Errorf("%s: %s = %q, not a file in a read-only mounted Secret (%v)", tc.d.Name, name, path, mounted)
			case !want && path != "":
				t.Errorf("%s: %s set by default", tc.d.Name, name)
			}
		}
		for _, v := range tc.d.Spec.Template.Spec.Volumes {
			if v.Secret == nil || v.Secret.SecretName == "" {
				t.Errorf("%s: volume %s is not a Secret", tc.d.Name, v.Name)
			}
		}
		for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
			if https := p.HTTPGet.Scheme == corev1.URISchemeHTTPS; https != want {
				t.Errorf("%s: probe %s scheme %q, want HTTPS %v", tc.d.Name, p.HTTPGet.Path, p.HTTPGet.Scheme, want)
			}
		}
	}
}

func forbiddenForDP(name string) bool {
	return name == "TOLLGATE_ADMIN_TOKEN" || name == "TOLLGATE_SECRET_KEY" || name == "TOLLGATE_DATABASE_URL"
}

func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// checkPod asserts probes, the preStop drain, a grace period that holds it, and that the pod reads the
// given Secret.
func checkPod(t *testing.T, d *appsv1.Deployment, secret string) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if !selects(d.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
		t.Errorf("%s: selector %v does not match its pods", d.Name, d.Spec.Selector.MatchLabels)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%s: %d containers", d.Name, len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("%s: readiness probe %+v, want GET /readyz", d.Name, c.ReadinessProbe)
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("%s: liveness probe %+v, want GET /healthz", d.Name, c.LivenessProbe)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatalf("%s: no preStop sleep", d.Name)
	}
	var drain, shutdown int64
	for _, e := range c.Env {
		switch e.Name {
		case "TOLLGATE_DRAIN_DELAY":
			_, _ = fmt.Sscanf(e.Value, "%ds", &drain)
		case "TOLLGATE_SHUTDOWN_TIMEOUT":
			_, _ = fmt.Sscanf(e.Value, "%ds", &shutdown)
		}
	}
	if drain <= 0 || shutdown <= 0 {
		t.Errorf("%s: TOLLGATE_DRAIN_DELAY %ds / TOLLGATE_SHUTDOWN_TIMEOUT %ds not set", d.Name, drain, shutdown)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g <= c.Lifecycle.PreStop.Sleep.Seconds+drain+shutdown {
		t.Errorf("%s: terminationGracePeriodSeconds %v does not hold preStop %d + drain %d + shutdown %d", d.Name, g,
			c.Lifecycle.PreStop.Sleep.Seconds, drain, shutdown)
	}
	if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != secret {
		t.Errorf("%s: envFrom %+v, want Secret %s", d.Name, c.EnvFrom, secret)
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: root filesystem not read-only", d.Name)
	}
}

// TestChartRefusesUnsafeValues: a single control plane or a grace period shorter than the drain fails to
// render with a message naming the value.
func TestChartRefusesUnsafeValues(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ values, want string }{
		{"controlPlane: {replicas: 1}", "controlPlane.replicas"},
		{"dataPlane: {terminationGracePeriodSeconds: 30}", "dataPlane.terminationGracePeriodSeconds"},
		{"controlPlane: {tls: {grpcSecret: cp-tls}}", "dataPlane.tls.controlPlaneSecret"},
		{"controlPlane: {tls: {requireClientCert: true}}", "controlPlane.tls.grpcSecret"},
		{"dataPlane: {redis: {cluster: true}}", "dataPlane.redis.keyPrefix"},
		{"dataPlane: {redis: {cluster: true, keyPrefix: 'tollgate:'}}", "dataPlane.redis.keyPrefix"},
	} {
		f := t.TempDir() + "/values.yaml"
		if err := writeFile(f, tc.values); err != nil {
			t.Fatal(err)
		}
		if _, err := renderErr(ch, f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %q: render = %v, want an error naming %s", tc.values, err, tc.want)
		}
	}
}

// TestStrictDecodingCatchesMistakes proves the decoder is strict: a misspelt field, an unknown kind and
// a duplicate key are all errors.
func TestStrictDecodingCatchesMistakes(t *testing.T) {
	for _, doc := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selektor: {a: b}}\n",
		"apiVersion: v1\nkind: Frobnicator\nmetadata: {name: x}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nmetadata: {name: y}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {template: {spec: {containers: [{name: c, imagePullPolicy: IfNotPresent, livenessProbe: {httpGet: {path: /, port: 1}, periodSecond: 1}}]}}}\n",
	} {
		if _, _, err := decodeStrict([]byte(doc)); err == nil {
			t.Errorf("decodeStrict accepted:\n%s", doc)
		}
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o600) }

// dataPlane.metricsPort moves /metrics off the client port: the data plane is told so
// (TOLLGATE_METRICS_ADDR), the port is exposed and scraped, and only networkPolicy.metricsFrom reaches it.
func TestDataPlaneMetricsPort(t *testing.T) {
	def := render(t)
	for _, c := range get[*appsv1.Deployment](t, def, "Deployment/tg-tollgate-dataplane").Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == "TOLLGATE_METRICS_ADDR" {
				t.Errorf("defaults set TOLLGATE_METRICS_ADDR=%s", e.Value)
			}
		}
	}
	objs := render(t, chartDir+"/values-production.yaml")
	dp := get[*appsv1.Deployment](t, objs, "Deployment/tg-tollgate-dataplane")
	c := dp.Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["TOLLGATE_METRICS_ADDR"] != ":9102" {
		t.Errorf("TOLLGATE_METRICS_ADDR = %q, want :9102", env["TOLLGATE_METRICS_ADDR"])
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["metrics"] != 9102 {
		t.Errorf("container ports %v, want metrics 9102", ports)
	}
	svcPorts := map[string]string{}
	for _, p := range get[*corev1.Service](t, objs, "Service/tg-tollgate-dataplane").Spec.Ports {
		svcPorts[p.Name] = p.TargetPort.String()
	}
	if svcPorts["metrics"] != "metrics" {
		t.Errorf("service ports %v, want metrics", svcPorts)
	}
	for comp, want := range map[string]string{"dataplane": "metrics", "controlplane": "http"} {
		sm := get[*serviceMonitor](t, objs, "ServiceMonitor/tg-tollgate-"+comp)
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != want || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("%s ServiceMonitor endpoints %+v, want port %s", comp, sm.Spec.Endpoints, want)
		}
	}
	np := get[*networkingv1.NetworkPolicy](t, objs, "NetworkPolicy/tg-tollgate-dataplane")
	found := false
	for _, r := range np.Spec.Ingress {
		if len(r.Ports) == 1 && r.Ports[0].Port != nil && r.Ports[0].Port.String() == "metrics" {
			found = true
			if len(r.From) != 1 || r.From[0].NamespaceSelector == nil ||
				r.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
				t.Errorf("metrics port open to %+v, want the monitoring namespace only", r.From)
			}
		}
	}
	if !found {
		t.Errorf("no NetworkPolicy rule for the metrics port: %+v", np.Spec.Ingress)
	}
}

// TestRedisClusterValues: dataPlane.redis.cluster with a hash-tagged prefix sets TOLLGATE_REDIS_CLUSTER and
// TOLLGATE_REDIS_KEY_PREFIX on the data planes.
func TestRedisClusterValues(t *testing.T) {
	f := t.TempDir() + "/values.yaml"
	if err := writeFile(f, "dataPlane: {redis: {cluster: true, keyPrefix: '{tollgate}:'}}"); err != nil {
		t.Fatal(err)
	}
	dp := get[*appsv1.Deployment](t, render(t, f), "Deployment/tg-tollgate-dataplane")
	env := map[string]string{}
	for _, e := range dp.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["TOLLGATE_REDIS_CLUSTER"] != "true" || env["TOLLGATE_REDIS_KEY_PREFIX"] != "{tollgate}:" {
		t.Errorf("data-plane env %v", env)
	}
}
