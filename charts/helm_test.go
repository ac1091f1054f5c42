package charts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// helmBinary returns helm, or skips the test.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("EA_HELM"); p != "" {
		return p
	}
	p, err := exec.LookPath("helm")
	if err != nil {
		t.Skip("helm is not installed: GOBIN=/usr/local/bin go install helm.sh/helm/v3/cmd/helm@v3.22.0 (.ci/run does it), or set EA_HELM to the binary")
	}
	return p
}

// object is one Kubernetes object of the rendered chart, as parsed YAML.
type object map[string]any

func (o object) kind() string { return str(o, "kind") }
func (o object) name() string { return str(o, "metadata", "name") }

// get walks o by map keys.
func get(v any, path ...string) any {
	for _, k := range path {
		m, ok := asMap(v)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// asMap returns a parsed mapping: yaml decodes nested mappings with the type
// of the outer one (object).
func asMap(v any) (map[string]any, bool) {
	switch m := v.(type) {
	case object:
		return m, true
	case map[string]any:
		return m, true
	}
	return nil, false
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...string) []any {
	l, _ := get(v, path...).([]any)
	return l
}

// render runs helm template on the chart with the given --set values.
func render(t *testing.T, set ...string) ([]object, error) {
	t.Helper()
	args := []string{"template", "ea", chartDir, "--namespace", "agents"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(helmBinary(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	dec := yaml.NewDecoder(&out)
	var objs []object
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template output is not YAML: %v", err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs, nil
}

func mustRender(t *testing.T, set ...string) map[string]object {
	t.Helper()
	objs, err := render(t, set...)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]object{}
	for _, o := range objs {
		key := o.kind() + "/" + o.name()
		if _, dup := byKey[key]; dup {
			t.Errorf("two objects %s", key)
		}
		if str(o, "apiVersion") == "" || o.kind() == "" || o.name() == "" {
			t.Errorf("object without apiVersion, kind or name: %v", o)
		}
		byKey[key] = o
	}
	return byKey
}

// container returns the only container of a Deployment.
func container(t *testing.T, d object) map[string]any {
	t.Helper()
	cs := list(d, "spec", "template", "spec", "containers")
	if len(cs) != 1 {
		t.Fatalf("%s has %d containers, want 1", d.name(), len(cs))
	}
	c, _ := asMap(cs[0])
	return c
}

// envOf returns a container's environment: name to value, or to
// "secret:<name>/<key>" for a Secret reference.
func envOf(c map[string]any) map[string]string {
	out := map[string]string{}
	for _, e := range list(c, "env") {
		name := str(e, "name")
		if ref := get(e, "valueFrom", "secretKeyRef"); ref != nil {
			out[name] = "secret:" + str(ref, "name") + "/" + str(ref, "key")
			continue
		}
		out[name] = str(e, "value")
	}
	return out
}

// portsOf returns a container's or Service's ports: name to port number.
func portsOf(v any, field string) map[string]int {
	out := map[string]int{}
	for _, p := range list(v, "ports") {
		n, _ := get(p, field).(int)
		out[str(p, "name")] = n
	}
	return out
}

func labelsOf(v any, path ...string) map[string]string {
	out := map[string]string{}
	m, _ := asMap(get(v, path...))
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// selects reports whether selector's labels are all in labels.
func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func checkProbes(t *testing.T, name string, c map[string]any) {
	t.Helper()
	for probe, path := range map[string]string{"livenessProbe": "/healthz", "readinessProbe": "/readyz"} {
		if p := str(c, probe, "httpGet", "path"); p != path {
			t.Errorf("%s %s path %q, want %s", name, probe, p, path)
		}
		if p := get(c, probe, "httpGet", "port"); p != "metrics" {
			t.Errorf("%s %s port %v, want metrics", name, probe, p)
		}
	}
}

// renderNotes renders the chart's NOTES.txt: helm template leaves it out,
// so a copy of the chart includes it in a ConfigMap.
func renderNotes(t *testing.T, set ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "templates", "NOTES.txt")); err != nil {
		t.Fatal(err)
	}
	tpl := "{{- define \"notes-under-test\" }}" + string(notes) + "{{- end }}"
	if err := os.WriteFile(filepath.Join(dir, "templates", "_notes.tpl"), []byte(tpl), 0o600); err != nil {
		t.Fatal(err)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes-under-test\ndata:\n  notes: |\n{{ include \"notes-under-test\" . | indent 4 }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes-under-test.yaml"), []byte(cm), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"template", "ea", dir, "--namespace", "agents", "--show-only", "templates/notes-under-test.yaml"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("render NOTES.txt: %v: %s", err, out)
	}
	var o object
	if err := yaml.Unmarshal(out, &o); err != nil {
		t.Fatalf("NOTES.txt ConfigMap: %v", err)
	}
	return str(o, "data", "notes")
}

// TestHelmTemplate renders the chart with helm and checks what it deploys:
// nodes and supervisors with their environment, ports and probes, Services
// that select them, ServiceMonitors, the dashboard ConfigMap for Grafana's
// sidecar, and the refusals of bad values.
func TestHelmTemplate(t *testing.T) {
	t.Parallel()
	helmBinary(t)
	objs := mustRender(t, "nats.url=nats://nats:4222")
	var kinds []string
	for k := range objs {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	want := []string{
		"ConfigMap/ea-effectors-dashboard",
		"Deployment/ea-effectors-node", "Deployment/ea-effectors-supervisor",
		"PodDisruptionBudget/ea-effectors-node", "PodDisruptionBudget/ea-effectors-supervisor",
		"Service/ea-effectors-node", "Service/ea-effectors-supervisor",
	}
	if !slices.Equal(kinds, want) {
		t.Fatalf("objects:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}

	// Nodes.
	node := objs["Deployment/ea-effectors-node"]
	if r := get(node, "spec", "replicas"); r != 3 {
		t.Errorf("node replicas %v, want 3", r)
	}
	nc := container(t, node)
	if str(nc, "name") != "ea-node" || str(nc, "image") != "ghcr.io/effectors/ea-node:0.1.0" {
		t.Errorf("node container %s, image %s", str(nc, "name"), str(nc, "image"))
	}
	if get(nc, "command") != nil || get(nc, "args") != nil {
		t.Errorf("node container sets command %v / args %v: the image's entrypoint is ea-node, configured by environment", get(nc, "command"), get(nc, "args"))
	}
	nodeEnv := envOf(nc)
	for k, v := range map[string]string{"EA_NATS": "nats://nats:4222", "EA_PREFIX": "ea", "EA_REPLICAS": "3", "EA_METRICS": "0.0.0.0:9464",
		"EA_LOG_FORMAT": "json", "EA_SHUTDOWN_GRACE": "10s", "EA_HEARTBEAT": "1s", "EA_IDLE": "2m"} {
		if nodeEnv[k] != v {
			t.Errorf("node env %s = %q, want %q", k, nodeEnv[k], v)
		}
	}
	if p := portsOf(nc, "containerPort"); !maps.Equal(p, map[string]int{"metrics": 9464}) {
		t.Errorf("node container ports %v", p)
	}
	checkProbes(t, "node", nc)

	// Supervisors, with the gateway on loopback by default (no token, not
	// in the Service: reach it with kubectl port-forward).
	sup := objs["Deployment/ea-effectors-supervisor"]
	if r := get(sup, "spec", "replicas"); r != 2 {
		t.Errorf("supervisor replicas %v, want 2", r)
	}
	sc := container(t, sup)
	if str(sc, "name") != "ea-supervisor" || str(sc, "image") != "ghcr.io/effectors/ea-supervisor:0.1.0" {
		t.Errorf("supervisor container %s, image %s", str(sc, "name"), str(sc, "image"))
	}
	if get(sc, "command") != nil || get(sc, "args") != nil {
		t.Errorf("supervisor container sets command / args: the image's entrypoint is ea-supervisor")
	}
	supEnv := envOf(sc)
	for k, v := range map[string]string{"EA_NATS": "nats://nats:4222", "EA_PREFIX": "ea", "EA_METRICS": "0.0.0.0:9465", "EA_GATEWAY": "127.0.0.1:9466"} {
		if supEnv[k] != v {
			t.Errorf("supervisor env %s = %q, want %q", k, supEnv[k], v)
		}
	}
	if _, ok := supEnv["EA_GATEWAY_TOKEN"]; ok {
		t.Errorf("supervisor env has EA_GATEWAY_TOKEN without a Secret given")
	}
	if p := portsOf(sc, "containerPort"); !maps.Equal(p, map[string]int{"metrics": 9465, "gateway": 9466}) {
		t.Errorf("supervisor container ports %v", p)
	}
	checkProbes(t, "supervisor", sc)

	// Services select their pods (and only theirs), on the named ports.
	for _, c := range []struct {
		svc, dep string
		ports    map[string]int
	}{
		{"Service/ea-effectors-node", "Deployment/ea-effectors-node", map[string]int{"metrics": 9464}},
		{"Service/ea-effectors-supervisor", "Deployment/ea-effectors-supervisor", map[string]int{"metrics": 9465}},
	} {
		svc, dep := objs[c.svc], objs[c.dep]
		sel := labelsOf(svc, "spec", "selector")
		if !selects(sel, labelsOf(dep, "spec", "template", "metadata", "labels")) {
			t.Errorf("%s selector %v does not select the pods of %s", c.svc, sel, c.dep)
		}
		if !maps.Equal(sel, labelsOf(dep, "spec", "selector", "matchLabels")) {
			t.Errorf("%s selector %v differs from %s's", c.svc, sel, c.dep)
		}
		if p := portsOf(get(svc, "spec"), "port"); !maps.Equal(p, c.ports) {
			t.Errorf("%s ports %v, want %v", c.svc, p, c.ports)
		}
		for _, p := range list(svc, "spec", "ports") {
			if str(p, "targetPort") != str(p, "name") {
				t.Errorf("%s port %s targets %q", c.svc, str(p, "name"), str(p, "targetPort"))
			}
		}
	}
	if selects(labelsOf(objs["Service/ea-effectors-node"], "spec", "selector"), labelsOf(sup, "spec", "template", "metadata", "labels")) {
		t.Error("the node Service selects supervisor pods")
	}

	// The dashboard for Grafana's sidecar: the file itself.
	cm := objs["ConfigMap/ea-effectors-dashboard"]
	if l := labelsOf(cm, "metadata", "labels"); l["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, want grafana_dashboard: \"1\"", l)
	}
	file, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var inMap, inFile any
	if err := json.Unmarshal([]byte(str(cm, "data", "effectors.json")), &inMap); err != nil {
		t.Fatalf("the ConfigMap's effectors.json is not JSON: %v", err)
	}
	if err := json.Unmarshal(file, &inFile); err != nil {
		t.Fatal(err)
	}
	if a, b := fmt.Sprint(inMap), fmt.Sprint(inFile); a != b {
		t.Error("the ConfigMap's dashboard differs from " + dashboardFile)
	}

	// ServiceMonitors for nodes and supervisors; a public gateway with its
	// token from a Secret, in the Service; NATS from a Secret.
	objs = mustRender(t, "nats.existingSecret.name=nats-url", "metrics.serviceMonitor.enabled=true",
		"metrics.serviceMonitor.labels.release=prom", "supervisor.gateway.address=0.0.0.0:9466",
		"supervisor.gateway.token.existingSecret.name=ea-gateway", "supervisor.gateway.origins=*.example.com",
		"dashboard.annotations.grafana_folder=effectors")
	for _, c := range []struct{ sm, svc string }{
		{"ServiceMonitor/ea-effectors-node", "Service/ea-effectors-node"},
		{"ServiceMonitor/ea-effectors-supervisor", "Service/ea-effectors-supervisor"},
	} {
		sm, svc := objs[c.sm], objs[c.svc]
		if sm == nil {
			t.Fatalf("no %s", c.sm)
		}
		if str(sm, "apiVersion") != "monitoring.coreos.com/v1" {
			t.Errorf("%s apiVersion %s", c.sm, str(sm, "apiVersion"))
		}
		if !selects(labelsOf(sm, "spec", "selector", "matchLabels"), labelsOf(svc, "metadata", "labels")) {
			t.Errorf("%s does not select %s", c.sm, c.svc)
		}
		if labelsOf(sm, "metadata", "labels")["release"] != "prom" {
			t.Errorf("%s lacks the extra label release: prom", c.sm)
		}
		eps := list(sm, "spec", "endpoints")
		if len(eps) != 1 || str(eps[0], "port") != "metrics" || str(eps[0], "path") != "/metrics" || str(eps[0], "interval") != "30s" {
			t.Errorf("%s endpoints %v", c.sm, eps)
		}
		if ns := list(sm, "spec", "namespaceSelector", "matchNames"); len(ns) != 1 || ns[0] != "agents" {
			t.Errorf("%s namespaces %v", c.sm, ns)
		}
	}
	sc = container(t, objs["Deployment/ea-effectors-supervisor"])
	supEnv = envOf(sc)
	for k, v := range map[string]string{"EA_NATS": "secret:nats-url/url", "EA_GATEWAY": "0.0.0.0:9466",
		"EA_GATEWAY_TOKEN": "secret:ea-gateway/token", "EA_GATEWAY_ORIGINS": "*.example.com"} {
		if supEnv[k] != v {
			t.Errorf("supervisor env %s = %q, want %q", k, supEnv[k], v)
		}
	}
	if e := envOf(container(t, objs["Deployment/ea-effectors-node"]))["EA_NATS"]; e != "secret:nats-url/url" {
		t.Errorf("node EA_NATS = %q, want the Secret", e)
	}
	if p := portsOf(get(objs["Service/ea-effectors-supervisor"], "spec"), "port"); !maps.Equal(p, map[string]int{"metrics": 9465, "gateway": 9466}) {
		t.Errorf("supervisor Service ports with a public gateway: %v", p)
	}
	if a := str(objs["ConfigMap/ea-effectors-dashboard"], "metadata", "annotations", "grafana_folder"); a != "effectors" {
		t.Errorf("dashboard annotation grafana_folder = %q", a)
	}

	// Without supervisors, without the dashboard.
	objs = mustRender(t, "nats.url=nats://nats:4222", "supervisor.enabled=false", "dashboard.enabled=false", "metrics.serviceMonitor.enabled=true")
	for k := range objs {
		if strings.Contains(k, "supervisor") || strings.HasPrefix(k, "ConfigMap/") {
			t.Errorf("supervisor.enabled=false, dashboard.enabled=false still render %s", k)
		}
	}
	if objs["ServiceMonitor/ea-effectors-node"] == nil {
		t.Error("no node ServiceMonitor without supervisors")
	}

	// NOTES.txt renders (helm template skips it: render it as a template of
	// a copy of the chart).
	for _, set := range [][]string{
		{"nats.url=nats://nats:4222"},
		{"nats.url=nats://nats:4222", "supervisor.gateway.address=0.0.0.0:9466", "supervisor.gateway.token.existingSecret.name=gw", "metrics.serviceMonitor.enabled=true"},
		{"nats.url=nats://nats:4222", "supervisor.enabled=false", "dashboard.enabled=false"},
	} {
		notes := renderNotes(t, set...)
		for _, want := range []string{"ea-effectors-node", "ea create counter/c1"} {
			if !strings.Contains(notes, want) {
				t.Errorf("NOTES.txt with %v lacks %q:\n%s", set, want, notes)
			}
		}
		if strings.Contains(notes, "<no value>") {
			t.Errorf("NOTES.txt with %v shows <no value>:\n%s", set, notes)
		}
	}

	// helm lint --strict passes, with the defaults and with everything on.
	for _, set := range [][]string{
		{"nats.url=nats://nats:4222"},
		{"nats.url=nats://nats:4222", "supervisor.gateway.address=0.0.0.0:9466", "supervisor.gateway.token.existingSecret.name=gw", "metrics.serviceMonitor.enabled=true"},
	} {
		args := []string{"lint", "--strict", chartDir}
		for _, v := range set {
			args = append(args, "--set", v)
		}
		if out, err := exec.Command(helmBinary(t), args...).CombinedOutput(); err != nil {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// Bad values are refused with a message saying what to set.
	for _, c := range []struct {
		set  []string
		want string
	}{
		{nil, "nats.url is required"},
		{[]string{"nats.url=nats://n:4222", "supervisor.gateway.address=0.0.0.0:9466"}, "supervisor.gateway.token.existingSecret.name is required"},
		{[]string{"nats.url=nats://n:4222", "supervisor.metrics.address=off"}, "supervisor.metrics.address must be host:port"},
		{[]string{"nats.url=nats://n:4222", "metrics.address=off"}, "metrics.address must be host:port"},
	} {
		_, err := render(t, c.set...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("helm template --set %v: %v, want an error saying %q", c.set, err, c.want)
		}
	}
}

// TestHelmRetention: the retention values reach nodes and supervisors (both
// provision) as the EA_* variables their flags read, and only when set.
func TestHelmRetention(t *testing.T) {
	t.Parallel()
	helmBinary(t)
	names := []string{"EA_LOG_MAX_AGE", "EA_LOG_MAX_BYTES", "EA_DEAD_MAX_AGE", "EA_DEAD_MAX_BYTES"}
	plain := mustRender(t, "nats.url=nats://nats:4222")
	for _, d := range []string{"Deployment/ea-effectors-node", "Deployment/ea-effectors-supervisor"} {
		env := envOf(container(t, plain[d]))
		for _, k := range names {
			if v, ok := env[k]; ok {
				t.Errorf("%s sets %s=%q with no retention value given: the streams' own setting must stay", d, k, v)
			}
		}
	}
	set := mustRender(t, "nats.url=nats://nats:4222", "retention.logMaxAge=720h", "retention.logMaxBytes=50GB",
		"retention.deadMaxAge=unlimited", "retention.deadMaxBytes=1GB")
	want := map[string]string{"EA_LOG_MAX_AGE": "720h", "EA_LOG_MAX_BYTES": "50GB", "EA_DEAD_MAX_AGE": "unlimited", "EA_DEAD_MAX_BYTES": "1GB"}
	for _, d := range []string{"Deployment/ea-effectors-node", "Deployment/ea-effectors-supervisor"} {
		env := envOf(container(t, set[d]))
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s env %s = %q, want %q", d, k, env[k], v)
			}
		}
	}
}
