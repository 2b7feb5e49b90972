package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/kcedar/kcedar/internal/upstream"
)

// chainPolicies: dev reads pods in dev; creates of configmaps in dev need
// a team label; protected configmaps are never deleted; contractors never
// read secrets.
const chainPolicies = `
@id("dev-reads") permit (principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list"], resource is core::pods)
when { resource.namespace == "dev" };
@id("labelled-creates") permit (principal in k8s::Group::"dev", action == k8s::Action::"create", resource is core::configmaps)
when { resource.namespace == "dev" && resource has object && resource.object.metadata has labels && resource.object.metadata.labels.hasTag("team") };
@id("protect") forbid (principal, action == k8s::Action::"delete", resource is core::configmaps)
when { resource has oldObject && resource.oldObject.metadata has labels && resource.oldObject.metadata.labels.hasTag("protected") };
@id("no-secrets") forbid (principal in k8s::Group::"contractors", action, resource is core::secrets);
`

// chainRBACObjects: ops and jane edit configmaps, pods (and their logs) and
// secrets in dev.
const chainRBACObjects = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: editor}
rules:
- apiGroups: [""]
  resources: [configmaps, pods, pods/log, secrets]
  verbs: [get, list, create, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: editors, namespace: dev}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: editor}
subjects:
- {kind: Group, apiGroup: rbac.authorization.k8s.io, name: ops}
- {kind: User, apiGroup: rbac.authorization.k8s.io, name: jane}
`

// chainFiles writes the policies and the RBAC objects.
func chainFiles(t *testing.T) (pol, rbac string) {
	t.Helper()
	dir := t.TempDir()
	return writeFile(t, dir, "p.cedar", chainPolicies), writeFile(t, dir, "rbac.yaml", chainRBACObjects)
}

// runSplit runs cmd with args, stdout and stderr apart.
func runSplit(t *testing.T, cmd *cobra.Command, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errw bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errw)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	if err := cmd.Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return out.String(), errw.String(), ee.code
		}
		return out.String(), errw.String() + err.Error(), 2
	}
	return out.String(), errw.String(), 0
}

// who-can, can-i --list and the access matrix answer for kcedar, then
// RBAC: a subject RBAC alone grants (jane, ops) is listed, kcedar's forbid
// still denies, and the output says which chain answered; --kcedar-only
// leaves RBAC out.
func TestReviewsAnswerForTheChain(t *testing.T) {
	pol, rbac := chainFiles(t)
	out, code := run(t, newWhoCanCmd(), "get", "pods", "-n", "dev", "-p", pol, "--rbac", rbac)
	if code != 0 || !strings.Contains(out, "chain: kcedar, then RBAC (--rbac "+rbac+" RBAC: ") || !strings.Contains(out, "jane ") ||
		!strings.Contains(out, "rbac/RoleBinding/dev/editors/editor/0") || !strings.Contains(out, "dev-reads") {
		t.Errorf("who-can with RBAC (exit %d):\n%s", code, out)
	}
	out, code = run(t, newWhoCanCmd(), "get", "pods", "-n", "dev", "-p", pol, "--rbac", rbac, "-o", "json")
	var resp struct {
		Users []string `json:"users"`
		Chain string   `json:"chain"`
	}
	if err := json.Unmarshal([]byte(out), &resp); code != 0 || err != nil || !strings.HasPrefix(resp.Chain, "kcedar, then RBAC") || strings.Join(resp.Users, ",") != "jane" {
		t.Errorf("who-can -o json (exit %d, %v): %+v\n%s", code, err, resp, out)
	}
	out, code = run(t, newWhoCanCmd(), "get", "pods", "-n", "dev", "-p", pol, "--kcedar-only")
	if code != 0 || !strings.Contains(out, "chain: kcedar alone (--kcedar-only)") || strings.Contains(out, "jane") {
		t.Errorf("who-can --kcedar-only (exit %d):\n%s", code, out)
	}
	if out, code := run(t, newWhoCanCmd(), "get", "pods", "-p", pol, "--kcedar-only", "--rbac", rbac); code != 2 {
		t.Errorf("--kcedar-only with --rbac: exit %d\n%s", code, out)
	}
	out, code = run(t, newCanICmd(), "--list", "--as", "jane", "--as-group", "contractors", "-n", "dev", "-p", pol, "--rbac", rbac)
	if code != 0 || !strings.Contains(out, "rbac/RoleBinding/dev/editors") || !strings.Contains(out, "DENIED") || !strings.Contains(out, "chain: kcedar, then RBAC") {
		t.Errorf("can-i --list with RBAC (exit %d):\n%s", code, out)
	}
	out, code = run(t, newAccessMatrixCmd(), "-p", pol, "--rbac", rbac, "--verbs", "get,create")
	for _, want := range []string{"chain: kcedar, then RBAC", "jane", "ops", "pods/log", "NAMESPACES"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("access-matrix with RBAC lacks %q (exit %d):\n%s", want, code, out)
		}
	}
}

// can-i VERB RESOURCE says yes, no, or yes if the conditions hold, as a
// 1.38 SubjectAccessReview with conditions answers it: each in the mode
// kcedar serve runs in, for the chain, with its exit status.
func TestCanIOneRequest(t *testing.T) {
	pol, rbac := chainFiles(t)
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"get", "pods", "web", "-n", "dev", "--as", "ann", "--as-group", "dev"}, 0, []string{"yes\n", "chain: kcedar, then RBAC"}},
		{[]string{"get", "pods", "web", "-n", "dev", "--as", "jane"}, 0, []string{"yes\n"}},
		{[]string{"get", "pods", "web", "-n", "dev", "--as", "jane", "--kcedar-only"}, 3, []string{"no\n", "chain: kcedar alone"}},
		{[]string{"get", "secrets", "s", "-n", "dev", "--as", "jane", "--as-group", "contractors"}, 3, []string{"no\n"}},
		// kcedar's allow conditions: folded without conditional
		// authorization, enforced in admission, or returned.
		{[]string{"create", "configmaps", "-n", "dev", "--as", "ann", "--as-group", "dev"}, 3, []string{"no\n", "mode: none"}},
		{[]string{"create", "configmaps", "-n", "dev", "--as", "ann", "--as-group", "dev", "--mode", "admission-enforcement"}, 4,
			[]string{"yes, if:\n  kcedar allows if resource.object.metadata has labels && resource.object.metadata.labels.hasTag(\"team\")  (labelled-creates)", "admission webhook checks them"}},
		{[]string{"create", "configmaps", "-n", "dev", "--as", "ann", "--as-group", "dev", "--mode", "conditions-review"}, 4,
			[]string{"yes, if:\n  kcedar allows if", "otherwise no authorizer allows"}},
		// RBAC allows what kcedar leaves conditional: yes, unless the deny
		// condition holds.
		{[]string{"delete", "configmaps", "cfg", "-n", "dev", "--as", "jane", "--mode", "conditions-review"}, 4,
			[]string{"kcedar denies if resource.oldObject.metadata has labels", "otherwise rbac allows"}},
		{[]string{"create", "configmaps", "-n", "dev", "--as", "jane", "--mode", "conditions-review"}, 0, []string{"yes\n"}},
	} {
		args := append(tc.args, "-p", pol)
		if !slices.Contains(tc.args, "--kcedar-only") {
			args = append(args, "--rbac", rbac)
		}
		out, code := run(t, newCanICmd(), args...)
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d:\n%s", tc.args, code, tc.code, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%q: the answer lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
	out, code := run(t, newCanICmd(), "delete", "configmaps", "cfg", "-n", "dev", "--as", "jane", "--mode", "conditions-review", "-p", pol, "--rbac", rbac, "-o", "json")
	var sar struct {
		Spec struct {
			AuthorizationOptions struct {
				HandledDecisionTypes []string `json:"handledDecisionTypes"`
			} `json:"authorizationOptions"`
		} `json:"spec"`
		Status struct {
			Allowed, Denied     bool
			ConditionalDecision struct {
				Type  string `json:"type"`
				Union []struct {
					AuthorizerName string `json:"authorizerName"`
					Decision       struct {
						Type          string `json:"type"`
						ConditionsMap struct {
							DenyConditions []struct{ ID, Condition string } `json:"denyConditions"`
						} `json:"conditionsMap"`
					} `json:"decision"`
				} `json:"union"`
			} `json:"conditionalDecision"`
		} `json:"status"`
		Answer string `json:"answer"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\nyes, if the conditions hold", 2)[0]), &sar); err != nil || code != 4 {
		t.Fatalf("-o json (exit %d): %v\n%s", code, err, out)
	}
	cd := sar.Status.ConditionalDecision
	if sar.Answer != "yes, if" || sar.Status.Allowed || sar.Status.Denied || cd.Type != "Union" || len(cd.Union) != 2 ||
		cd.Union[0].AuthorizerName != "kcedar" || cd.Union[0].Decision.Type != "ConditionsMap" || len(cd.Union[0].Decision.ConditionsMap.DenyConditions) != 1 ||
		cd.Union[1].AuthorizerName != "rbac" || cd.Union[1].Decision.Type != "Allow" || len(sar.Spec.AuthorizationOptions.HandledDecisionTypes) != 5 {
		t.Errorf("-o json: %+v\n%s", sar, out)
	}
}

// why prints nothing on stderr for a plain request, speaks of the mode the
// server runs in, and explains the chain: RBAC's permit after kcedar's
// NoOpinion, and the chain's decision.
func TestWhyExplainsTheChain(t *testing.T) {
	pol, rbac := chainFiles(t)
	stdout, stderr, code := runSplit(t, newWhyCmd(), "get", "pods", "web", "-n", "dev", "--as", "jane", "-p", pol, "--rbac", rbac)
	for _, want := range []string{"chain: kcedar, then RBAC", "kcedar's decision: NoOpinion", "RBAC (asked on kcedar's NoOpinion): Allow",
		"permit rbac/RoleBinding/dev/editors/editor/0", "decision of the chain: Allow (by rbac)"} {
		if code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("why lacks %q (exit %d):\n%s", want, code, stdout)
		}
	}
	if stderr != "" {
		t.Errorf("why wrote on stderr: %q", stderr)
	}
	for mode, want := range map[string]string{
		"none":                  "kcedar serve answers: NoOpinion, the conditions folded",
		"admission-enforcement": "kcedar serve answers: Allow, under --admission-enforcement",
		"conditions-review":     "kcedar serve answers: the conditions below (status.conditionalDecision)",
	} {
		out, code := run(t, newWhyCmd(), "create", "configmaps", "-n", "dev", "--as", "ann", "--as-group", "dev", "-p", pol, "--mode", mode)
		if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "without conditional authorization") {
			t.Errorf("--mode %s: lacks %q (exit %d):\n%s", mode, want, code, out)
		}
	}
}

// replay composes with RBAC objects (--rbac), and -p with rbac convert's
// output composes the same; --kcedar-only counts kcedar's NoOpinion as
// not allowed.
func TestReplayComposesWithRBAC(t *testing.T) {
	pol, rbac := chainFiles(t)
	dir := t.TempDir()
	log := writeFile(t, dir, "audit.log", replayTestEvent("r1", "get", "/api/v1/namespaces/dev/pods/web", "jane", "staff", "allow")+
		replayTestEvent("k1", "get", "/api/v1/namespaces/dev/pods/web", "ann", "dev", "allow")+
		replayTestEvent("x1", "get", "/api/v1/namespaces/dev/secrets/s", "jane", "contractors", "allow"))
	converted, code := run(t, newRBACConvertCmd(), "-f", rbac)
	if code != 0 {
		t.Fatalf("rbac convert: exit %d\n%s", code, converted)
	}
	rbacPolicies := writeFile(t, dir, "rbac.cedar", converted)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--rbac", rbac}, []string{"chain:          kcedar, then RBAC (kcedar serve mode: none)", "RBAC:           --rbac", "newly denied: 1", "x1  allow -> Deny by kcedar"}},
		{[]string{"-p", rbacPolicies}, []string{"chain:          kcedar alone", "newly denied: 1", "x1  allow -> Deny by kcedar"}},
		{[]string{"--kcedar-only"}, []string{"chain:          kcedar alone", "newly denied: 2", "r1  allow -> NoOpinion"}},
	} {
		out, code := run(t, newReplayCmd(), append([]string{"--audit-log", log, "-p", pol, "--changes"}, tc.args...)...)
		for _, w := range tc.want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("%q: lacks %q (exit %d):\n%s", tc.args, w, code, out)
			}
		}
	}
}

// Without --mode, the mode is found from the cluster the policies come
// from: admission-enforcement when kcedar's ValidatingWebhookConfiguration
// is there, none when it is not; --mode wins.
func TestServeModeFromTheCluster(t *testing.T) {
	webhook := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"+defaultAdmissionWebhook || !webhook {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{"name":"`+defaultAdmissionWebhook+`"}}`)
	}))
	defer srv.Close()
	pol := &policySourceOptions{cluster: true, conn: schemaSource{Kubeconfig: writeFile(t, t.TempDir(), "kubeconfig", `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+srv.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)}}
	for _, tc := range []struct {
		webhook bool
		flag    string
		want    upstream.ServeMode
	}{{true, "", upstream.ServeModeAdmissionEnforcement}, {false, "", upstream.ServeModeNone}, {true, "conditions-review", upstream.ServeModeConditionsReview}} {
		webhook = tc.webhook
		o := chainOptions{mode: tc.flag}
		got, how, err := o.serveMode(t.Context(), pol)
		if err != nil || got != tc.want {
			t.Errorf("webhook %v, --mode %q: %s (%s), %v; want %s", tc.webhook, tc.flag, got, how, err, tc.want)
		}
	}
	if got, _, _ := (&chainOptions{}).serveMode(t.Context(), &policySourceOptions{}); got != upstream.ServeModeNone {
		t.Errorf("without a cluster: %s, want none", got)
	}
}
