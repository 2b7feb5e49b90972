package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/kcedar/kcedar/schemagen"
)

// runPlugin runs `kubectl cedar ARGS` in-process.
func runPlugin(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return run(t, newPluginRoot(), args...)
}

// embeddedSchemaFile is the embedded schema written to a file, for --schema
// (the plugin reads the cluster's live schema unless told otherwise).
func embeddedSchemaFile(t *testing.T) string {
	t.Helper()
	s, err := schemagen.Default()
	if err != nil {
		t.Fatal(err)
	}
	text, err := s.MarshalCedar()
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, t.TempDir(), "k8s.cedarschema", string(text))
}

// The plugin is the same commands: with policy files its who-can, can-i
// and why print what kcedar's print, and kcedar's flags keep their names.
func TestPluginRunsTheSameCommands(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	pol := "../../policies/quickstart"
	schema := embeddedSchemaFile(t)
	for _, tc := range []struct {
		plugin, kcedar []string
		want           string
	}{
		{[]string{"who-can", "get", "pods", "-n", "dev", "-p", pol}, []string{"who-can", "get", "pods", "-n", "dev", "-p", pol}, "dev-team-reads-own-namespace"},
		{[]string{"can-i", "--list", "--as", "jane", "--as-group", "dev", "-n", "dev", "-p", pol}, []string{"can-i", "--list", "--as", "jane", "--as-group", "dev", "-n", "dev", "-p", pol}, "dev-team-reads-own-namespace"},
		{[]string{"why", "get", "pods", "--as", "jane", "--as-group", "dev", "-n", "dev", "-p", pol}, []string{"why", "get", "pods", "--as", "jane", "--as-group", "dev", "-n", "dev", "-p", pol}, "permit dev-team-reads-own-namespace"},
	} {
		got, code := runPlugin(t, append(tc.plugin, "--schema", schema)...)
		root := newKcedarRootForTest()
		want, wantCode := run(t, root, tc.kcedar...)
		if code != 0 || wantCode != 0 || got != want || !strings.Contains(got, tc.want) {
			t.Errorf("kubectl cedar %q (code %d):\n%s\nkcedar (code %d):\n%s", tc.plugin, code, got, wantCode, want)
		}
	}
	if out, code := runPlugin(t, "who-can", "get", "pods", "-n", "dev", "-A", "-p", pol, "--schema", schema); code != 2 || !strings.Contains(out, "not both") {
		t.Errorf("-n with -A: code %d\n%s", code, out)
	}
	if f := newWhoCanCmd().Flags().Lookup("cluster"); f == nil || f.Value.Type() != "bool" {
		t.Errorf("after the plugin was built, kcedar who-can --cluster is %v", f)
	}
}

// newKcedarRootForTest is a kcedar root with the commands the plugin has.
func newKcedarRootForTest() *cobra.Command {
	root := &cobra.Command{Use: "kcedar", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newWhoCanCmd(), newCanICmd(), newWhyCmd(), newDiffCmd())
	return root
}

// Without -n the namespace is the kubeconfig context's (default when it
// names none); -A is every namespace; -o yaml is the JSON as YAML; without
// --policies the policies are the cluster's (here: no cluster to read).
func TestPluginKubectlConventions(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "config")
	writeFile(t, dir, "config", `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: x}
contexts:
- name: dev
  context: {cluster: c, user: u, namespace: dev}
- name: plain
  context: {cluster: c, user: u}
current-context: dev
`)
	t.Setenv("KUBECONFIG", kubeconfig)
	pol := "../../policies/quickstart"
	schema := embeddedSchemaFile(t)
	namespaceOf := func(args ...string) string {
		out, code := runPlugin(t, append([]string{"who-can", "get", "pods", "-p", pol, "--schema", schema, "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%q: code %d\n%s", args, code, out)
		}
		var rar struct {
			Namespace string `json:"namespace"`
		}
		if err := json.Unmarshal([]byte(out), &rar); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
		return rar.Namespace
	}
	for _, tc := range []struct {
		args []string
		want string
	}{{nil, "dev"}, {[]string{"--context", "plain"}, "default"}, {[]string{"-A"}, ""}, {[]string{"-n", "prod"}, "prod"}} {
		if got := namespaceOf(tc.args...); got != tc.want {
			t.Errorf("%q: namespace %q, want %q", tc.args, got, tc.want)
		}
	}
	out, code := runPlugin(t, "why", "get", "pods", "--as", "jane", "--as-group", "dev", "-p", pol, "--schema", schema, "-o", "yaml")
	var ex struct {
		Decision string `json:"decision"`
		Deciding []struct {
			ID string `json:"id"`
		} `json:"deciding"`
	}
	if err := yaml.Unmarshal([]byte(out), &ex); code != 0 || err != nil || ex.Decision != "Allow" || len(ex.Deciding) != 1 || ex.Deciding[0].ID != "dev-team-reads-own-namespace" {
		t.Errorf("why -o yaml: code %d, %v, %+v\n%s", code, err, ex, out)
	}
	if out, code := runPlugin(t, "who-can", "get", "pods"); code == 0 || !strings.Contains(out, "127.0.0.1:1") {
		t.Errorf("without --policies the cluster is read: code %d\n%s", code, out)
	}
	if !isPluginBinary("/usr/local/bin/kubectl-cedar") || isPluginBinary("bin/kcedar") {
		t.Error("isPluginBinary")
	}
}

// kubectl cedar takes kubectl's global flags (k8s.io/cli-runtime's) for
// its connection to the cluster: --server, --insecure-skip-tls-verify and
// --token replace the kubeconfig's, --as, --as-group and --as-uid
// impersonate. In can-i and why, --as and --as-group name the user asked
// about instead (as kubectl auth can-i), so the connection is not
// impersonated. kcedar's own commands do not take them.
func TestPluginTakesKubectlGlobalFlags(t *testing.T) {
	type seen struct{ user, groups, uid, auth string }
	asked := make(chan seen, 100)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked <- seen{r.Header.Get("Impersonate-User"), strings.Join(r.Header.Values("Impersonate-Group"), ","), r.Header.Get("Impersonate-Uid"), r.Header.Get("Authorization")}
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	t.Setenv("KUBECONFIG", writeFile(t, dir, "config", `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: from-kubeconfig}
contexts:
- name: dev
  context: {cluster: c, user: u, namespace: dev}
current-context: dev
`))
	schema := embeddedSchemaFile(t)
	for _, tc := range []struct {
		args []string
		want seen
	}{
		{[]string{"who-can", "get", "pods", "--as", "reviewer", "--as-group", "g1", "--as-group", "g2", "--as-uid", "42"},
			seen{"reviewer", "g1,g2", "42", "Bearer from-flag"}},
		{[]string{"who-can", "get", "pods"}, seen{auth: "Bearer from-flag"}},
		{[]string{"can-i", "--list", "--as", "jane", "--as-group", "dev"}, seen{auth: "Bearer from-flag"}},
		{[]string{"why", "get", "pods", "--as", "jane"}, seen{auth: "Bearer from-flag"}},
	} {
		out, code := runPlugin(t, append(tc.args, "--schema", schema, "--server", srv.URL, "--insecure-skip-tls-verify", "--token", "from-flag", "--request-timeout", "5s")...)
		if code == 0 {
			t.Errorf("%q: code 0 from a cluster that refuses everything\n%s", tc.args, out)
		}
		select {
		case got := <-asked:
			if got != tc.want {
				t.Errorf("%q: the API server saw %+v, want %+v", tc.args, got, tc.want)
			}
		default:
			t.Errorf("%q: the API server of --server was not asked\n%s", tc.args, out)
		}
		for len(asked) > 0 {
			<-asked
		}
	}
	if f := newWhoCanCmd().Flags(); f.Lookup("token") != nil || f.Lookup("as") != nil {
		t.Error("kcedar who-can has kubectl's global flags --token or --as")
	}
}

// kubectl cedar can-i and why without --as ask about the caller, as the
// API server authenticates it (a SelfSubjectReview), as kubectl auth can-i
// does.
func TestPluginAsksWhoYouAre(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/apis/authentication.k8s.io/v1/selfsubjectreviews" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview","status":{"userInfo":{"username":"jane","uid":"u-1","groups":["dev","system:authenticated"]}}}`)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	pol, schema := "../../policies/quickstart", embeddedSchemaFile(t)
	conn := []string{"-p", pol, "--schema", schema, "--server", srv.URL, "--insecure-skip-tls-verify", "--token", "t"}
	for args, want := range map[string]string{
		"can-i get pods web -n dev":  "yes\n",
		"can-i get pods web -n prod": "no\n",
		"why get pods web -n dev":    `user="jane" groups=[dev system:authenticated]`,
	} {
		out, _ := runPlugin(t, append(strings.Fields(args), conn...)...)
		if !strings.Contains(out, want) {
			t.Errorf("%s: lacks %q:\n%s", args, want, out)
		}
	}
	if out, code := runPlugin(t, "can-i", "get", "pods", "-n", "dev", "-p", pol, "--schema", schema, "--server", "https://127.0.0.1:1", "--request-timeout", "2s"); code != 2 || !strings.Contains(out, "give --as USER") {
		t.Errorf("no API server to ask: exit %d\n%s", code, out)
	}
}
