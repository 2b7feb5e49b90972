package lint

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/kcedar/kcedar/internal/testing/embeddedschema"
)

var (
	checkerOnce sync.Once
	checkerVal  *Checker
	checkerErr  error
)

func testChecker(t testing.TB) *Checker {
	t.Helper()
	s := embeddedschema.Schema(t)
	checkerOnce.Do(func() { checkerVal, checkerErr = NewChecker(s) })
	if checkerErr != nil {
		t.Fatal(checkerErr)
	}
	return checkerVal
}

// corpusCase is one deliberately broken policy file, the diagnostic it must
// give (code, position, a piece of the message and of the hint), and a fixed
// version that must validate clean.
type corpusCase struct {
	name      string
	broken    string
	code      string
	pos       string // line:col
	msg, hint string
	fixed     string
}

// The corpus: one case per class of mistake.
var corpus = []corpusCase{
	{
		name: "attribute typo",
		broken: `@id("c")
permit (principal, action, resource is core::pods)
when { resource.nmespace == "dev" };`,
		code: CodeUnknownAttr, pos: "3:17", msg: "unknown attribute nmespace on core::pods", hint: "did you mean namespace?",
		fixed: `@id("c")
permit (principal, action, resource is core::pods)
when { resource.namespace == "dev" };`,
	},
	{
		name:   "attribute typo after non-ASCII text (columns count runes)",
		broken: "@id(\"c\") // équipe\npermit (principal, action, resource is core::pods)\nwhen { resource.namespace == \"é\" && resource.nme == \"x\" };",
		code:   CodeUnknownAttr, pos: "3:46", msg: "unknown attribute nme on core::pods", hint: "did you mean name?",
		fixed: "@id(\"c\") // équipe\npermit (principal, action, resource is core::pods)\nwhen { resource.namespace == \"é\" && resource.name == \"x\" };",
	},
	{
		name: "namespace of a cluster-scoped resource",
		broken: `@id("c")
permit (principal, action == k8s::Action::"get", resource is core::nodes)
when { resource.namespace == "dev" };`,
		code: CodeOptionalAttr, pos: "3:17", msg: "resource.namespace on core::nodes is optional", hint: "core::nodes is cluster-scoped: it has a namespace only when a request names one",
		fixed: `@id("c")
permit (principal, action == k8s::Action::"get", resource is core::nodes)
when { resource.name == "n1" };`,
	},
	{
		name: "object read without has",
		broken: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource.object.v1.spec.nodeName == "n1" };`,
		code: CodeOptionalAttr, pos: "3:17", msg: "resource.object on core::pods is optional", hint: "guard it: resource has object && resource.object has v1 && resource.object.v1 has spec && resource.object.v1.spec has nodeName",
		fixed: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };`,
	},
	{
		name: "object without a version",
		broken: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object.spec.nodeName == "n1" };`,
		code: CodeUnknownAttr, pos: "3:47", msg: "unknown attribute object.spec on core::pods", hint: "objects are per version: resource.object.v1.spec",
		fixed: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };`,
	},
	{
		name: "resource type typo",
		broken: `@id("c")
permit (principal, action, resource is core::pod);`,
		code: CodeUnknownType, pos: "2:40", msg: "unknown entity type core::pod", hint: "did you mean core::pods?",
		fixed: `@id("c")
permit (principal, action, resource is core::pods);`,
	},
	{
		name: "API group namespace not reversed",
		broken: `@id("c")
permit (principal, action, resource is networking::ingresses);`,
		code: CodeUnknownType, pos: "2:40", msg: "unknown entity type networking::ingresses", hint: "did you mean io::k8s::networking::ingresses?",
		fixed: `@id("c")
permit (principal, action, resource is io::k8s::networking::ingresses);`,
	},
	{
		name: "principal type typo",
		broken: `@id("c")
permit (principal is k8s::Users, action, resource is core::pods);`,
		code: CodeUnknownType, pos: "2:22", msg: "unknown entity type k8s::Users", hint: "did you mean k8s::User?",
		fixed: `@id("c")
permit (principal is k8s::User, action, resource is core::pods);`,
	},
	{
		name: "action that is not a verb",
		broken: `@id("c")
permit (principal, action == k8s::Action::"read", resource is core::pods);`,
		code: CodeUnknownAction, pos: "2:43", msg: `unknown action k8s::Action::"read"`, hint: "reads are get, list and watch",
		fixed: `@id("c")
permit (principal, action in [k8s::Action::"get", k8s::Action::"list", k8s::Action::"watch"], resource is core::pods);`,
	},
	{
		name: "verb typo",
		broken: `@id("c")
permit (
  principal,
  action in [k8s::Action::"get", k8s::Action::"lsit"],
  resource is core::pods
);`,
		code: CodeUnknownAction, pos: "4:47", msg: `unknown action k8s::Action::"lsit"`, hint: `did you mean k8s::Action::"list"?`,
		fixed: `@id("c")
permit (
  principal,
  action in [k8s::Action::"get", k8s::Action::"list"],
  resource is core::pods
);`,
	},
	{
		name: "action that does not apply to the resource",
		broken: `@id("c")
permit (principal, action == k8s::Action::"approve", resource is core::pods);`,
		code: CodeNotApplicable, pos: "2:20", msg: "no action in the scope applies", hint: "core::pods supports the verbs: create, delete, deletecollection, get, list, patch, update, watch",
		fixed: `@id("c")
permit (principal, action == k8s::Action::"approve", resource is io::k8s::certificates::signers);`,
	},
	{
		name: "legacy impersonate on a constrained identity",
		broken: `@id("c")
permit (principal, action == k8s::Action::"impersonate", resource is io::k8s::authentication::nodes);`,
		code: CodeNotApplicable, pos: "2:20", msg: "no action in the scope applies", hint: "the API server asks the constrained verbs",
		fixed: `@id("c")
permit (principal, action == k8s::Action::"impersonate:arbitrary-node", resource is io::k8s::authentication::nodes);`,
	},
	{
		name: "constrained impersonate on a legacy identity",
		broken: `@id("c")
permit (principal, action == k8s::Action::"impersonate:user-info", resource is core::users);`,
		code: CodeNotApplicable, pos: "2:20", msg: "no action in the scope applies", hint: "is asked on the identities of authentication.k8s.io",
		fixed: `@id("c")
permit (principal, action == k8s::Action::"impersonate:user-info", resource is io::k8s::authentication::users);`,
	},
	{
		name: "an action group compared with ==",
		broken: `@id("c")
permit (principal, action == k8s::Action::"impersonate-on:user-info:*", resource);`,
		code: CodeNotApplicable, pos: "2:20", msg: "is an action group, not a verb", hint: `write action in k8s::Action::"impersonate-on:user-info:*"`,
		fixed: `@id("c")
permit (principal, action in k8s::Action::"impersonate-on:user-info:*", resource);`,
	},
	{
		name: "group as principal",
		broken: `@id("c")
permit (principal == k8s::Group::"dev", action, resource is core::pods);`,
		code: CodeNotApplicable, pos: "2:9", msg: "never groups", hint: `write principal in k8s::Group::"dev"`,
		fixed: `@id("c")
permit (principal in k8s::Group::"dev", action, resource is core::pods);`,
	},
	{
		name: "principal is a group type",
		broken: `@id("c")
permit (principal is k8s::Group, action, resource is core::pods);`,
		code: CodeNotApplicable, pos: "2:9", msg: "never groups", hint: `principal in k8s::Group::"<name>"`,
		fixed: `@id("c")
permit (principal in k8s::Group::"dev", action, resource is core::pods);`,
	},
	{
		name: "all verbs with ==",
		broken: `@id("c")
permit (principal, action == k8s::Action::"*", resource is core::pods);`,
		code: CodeNotApplicable, pos: "2:20", msg: "not a verb", hint: `write action in k8s::Action::"*"`,
		fixed: `@id("c")
permit (principal, action in k8s::Action::"*", resource is core::pods);`,
	},
	{
		name: "string compared with a number",
		broken: `@id("c")
permit (principal, action, resource is core::pods)
when { resource.name == 1 };`,
		code: CodeTypeMismatch, pos: "3:22", msg: "the types Long and String are not compatible", hint: "compare like with like",
		fixed: `@id("c")
permit (principal, action, resource is core::pods)
when { resource.name == "1" };`,
	},
	{
		name: "set compared with a string",
		broken: `@id("c")
permit (principal, action, resource is core::pods)
when { principal.groups == "dev" };`,
		code: CodeTypeMismatch, pos: "3:18", msg: "Set<String>", hint: `.contains("v")`,
		fixed: `@id("c")
permit (principal, action, resource is core::pods)
when { principal.groups.contains("dev") };`,
	},
	{
		name: "contains on a string",
		broken: `@id("c")
permit (principal, action, resource is core::pods)
when { principal.username.contains("admin") };`,
		code: CodeTypeMismatch, pos: "3:27", msg: "expected Set", hint: `like "*x*"`,
		fixed: `@id("c")
permit (principal, action, resource is core::pods)
when { principal.username like "*admin*" };`,
	},
	{
		name: "number compared with a string",
		broken: `@id("c")
permit (principal, action == k8s::Action::"update", resource is apps::deployments_scale)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has replicas && resource.object.v1.spec.replicas < "10" };`,
		code: CodeTypeMismatch, pos: "4:81", msg: "String", hint: "compare like with like",
		fixed: `@id("c")
permit (principal, action == k8s::Action::"update", resource is apps::deployments_scale)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has replicas && resource.object.v1.spec.replicas < 10 };`,
	},
	{
		name: "namespace of a user",
		broken: `@id("c")
permit (principal, action, resource is core::pods)
when { principal.namespace == resource.namespace };`,
		code: CodeUnknownAttr, pos: "3:18", msg: "unknown attribute namespace on k8s::Node, k8s::User", hint: "principal is k8s::ServiceAccount",
		fixed: `@id("c")
permit (principal, action, resource is core::pods)
when { principal is k8s::ServiceAccount && principal.namespace == resource.namespace };`,
	},
	{
		name: "name of a user",
		broken: `@id("c")
permit (principal is k8s::User, action, resource is core::pods)
when { principal.name == "alice" };`,
		code: CodeUnknownAttr, pos: "3:18", msg: "unknown attribute name on k8s::User", hint: "use principal.username",
		fixed: `@id("c")
permit (principal is k8s::User, action, resource is core::pods)
when { principal.username == "alice" };`,
	},
	{
		name: "optional principal uid",
		broken: `@id("c")
permit (principal, action, resource is core::pods)
when { principal.uid == "42" };`,
		code: CodeOptionalAttr, pos: "3:18", msg: "principal.uid", hint: "guard it: principal has uid",
		fixed: `@id("c")
permit (principal, action, resource is core::pods)
when { principal has uid && principal.uid == "42" };`,
	},
	{
		name: "label read as an attribute",
		broken: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object.metadata has labels &&
       resource.object.metadata.labels.env == "dev" };`,
		code: CodeUnknownAttr, pos: "4:40", msg: "unknown attribute env on k8s::StringMap", hint: `resource.object.metadata.labels.hasTag("env") && resource.object.metadata.labels.getTag("env")`,
		fixed: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object.metadata has labels &&
       resource.object.metadata.labels.hasTag("env") && resource.object.metadata.labels.getTag("env") == "dev" };`,
	},
	{
		name: "getTag without hasTag",
		broken: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object.metadata has labels &&
       resource.object.metadata.labels.getTag("env") == "dev" };`,
		code: CodeUnguardedTag, pos: "4:47", msg: `tag "env"`, hint: `guard it: resource.object.metadata.labels.hasTag("env") && resource.object.metadata.labels.getTag("env")`,
		fixed: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object.metadata has labels &&
       resource.object.metadata.labels.hasTag("env") && resource.object.metadata.labels.getTag("env") == "dev" };`,
	},
	{
		name: "metadata under the version",
		broken: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 &&
       resource.object.v1.metadata.name like "web-*" };`,
		code: CodeUnknownAttr, pos: "4:27", msg: "unknown attribute metadata", hint: "metadata is not per version: resource.object.metadata",
		fixed: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object.metadata has name &&
       resource.object.metadata.name like "web-*" };`,
	},
	{
		name: "field name typo in the object",
		broken: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodname == "n1" };`,
		code: CodeUnknownAttr, pos: "4:72", msg: "unknown attribute nodname", hint: "did you mean nodeName?",
		fixed: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource has object && resource.object has v1 && resource.object.v1 has spec &&
       resource.object.v1.spec has nodeName && resource.object.v1.spec.nodeName == "n1" };`,
	},
	{
		name: "subresource attribute on a resource",
		broken: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods)
when { resource.subresource == "exec" };`,
		code: CodeUnknownAttr, pos: "3:17", msg: "unknown attribute subresource on core::pods", hint: "resource is core::pods_exec",
		fixed: `@id("c")
permit (principal, action == k8s::Action::"create", resource is core::pods_exec);`,
	},
	{
		name: "context attribute",
		broken: `@id("c")
permit (principal, action, resource is core::pods)
when { context.namespace == "dev" };`,
		code: CodeUnknownAttr, pos: "3:16", msg: "unknown attribute namespace", hint: "no context attributes",
		fixed: `@id("c")
permit (principal, action, resource is core::pods)
when { resource.namespace == "dev" };`,
	},
	{
		name: "invalid extension literal",
		broken: `@id("c")
permit (principal, action, resource is k8s::NonResourceURL)
when { ip("10.0.0.0/33").isIpv4() };`,
		code: CodeExtension, pos: "3:11", msg: "failed to parse as IP address", hint: "fix its syntax",
		fixed: `@id("c")
permit (principal, action, resource is k8s::NonResourceURL)
when { ip("10.0.0.0/8").isIpv4() };`,
	},
	{
		name: "empty action list",
		broken: `@id("c")
permit (principal, action in [], resource is core::pods);`,
		code: CodeInvalid, pos: "2:30", msg: "empty set", hint: "list at least one action",
		fixed: `@id("c")
permit (principal, action in [k8s::Action::"get"], resource is core::pods);`,
	},
	{
		name: "missing semicolon",
		broken: `@id("a")
permit (principal, action, resource is core::pods)
@id("b")
permit (principal, action, resource is core::services);`,
		code: CodeSyntax, pos: "3:1", msg: "expected ;, found @", hint: "ends with `;`",
		fixed: `@id("a")
permit (principal, action, resource is core::pods);
@id("b")
permit (principal, action, resource is core::services);`,
	},
	{
		name: "trailing garbage",
		broken: `@id("a")
permit (principal, action, resource is core::pods);
garbage !!! (`,
		code: CodeSyntax, pos: "3:1", msg: "unexpected effect", hint: "a policy starts with permit or forbid",
		fixed: `@id("a")
permit (principal, action, resource is core::pods);`,
	},
	{
		name: "unterminated string",
		broken: `@id("a")
permit (principal, action, resource is core::pods)
when { resource.namespace == "dev };`,
		code: CodeSyntax, pos: "3:30", msg: "string literal not terminated", hint: "close the string",
		fixed: `@id("a")
permit (principal, action, resource is core::pods)
when { resource.namespace == "dev" };`,
	},
	{
		name: "duplicate @id",
		broken: `@id("team")
permit (principal, action, resource is core::pods);
@id("team")
permit (principal, action, resource is core::services);`,
		code: CodeDuplicateID, pos: "3:1", msg: `policy id "team" is also used at f.cedar:1:1`, hint: "must be unique",
		fixed: `@id("team-pods")
permit (principal, action, resource is core::pods);
@id("team-services")
permit (principal, action, resource is core::services);`,
	},
	{
		name: "empty @id",
		broken: `@id("")
permit (principal, action, resource is core::pods);`,
		code: CodeSyntax, pos: "1:1", msg: "@id is empty", hint: "give the policy a name",
		fixed: `@id("pods")
permit (principal, action, resource is core::pods);`,
	},
	{
		name: "resource entity in the scope",
		broken: `@id("c")
permit (principal, action, resource == core::pods::"web");`,
		code: CodeScope, pos: "1:1", msg: "resource entities have no ids", hint: "write `resource is <type>`",
		fixed: `@id("c")
permit (principal, action, resource is core::pods) when { resource.name == "web" };`,
	},
	{
		name: "too deeply nested",
		broken: `@id("c")
permit (principal, action, resource is core::pods)
when { ` + strings.Repeat("(", 70) + "true" + strings.Repeat(")", 70) + ` };`,
		code: CodeSyntax, pos: "3:", msg: "nesting deeper than", hint: "split the policy",
		fixed: `@id("c")
permit (principal, action, resource is core::pods)
when { ((true)) };`,
	},
}

func TestCorpus(t *testing.T) {
	c := testChecker(t)
	if len(corpus) < 30 {
		t.Fatalf("the corpus has %d cases, want at least 30", len(corpus))
	}
	for _, tc := range corpus {
		t.Run(tc.name, func(t *testing.T) {
			res := c.Check([]File{{Name: "f.cedar", Data: []byte(tc.broken)}})
			if len(res.Diagnostics) == 0 {
				t.Fatalf("no diagnostic for\n%s", tc.broken)
			}
			d := res.Diagnostics[0]
			pos := fmt.Sprintf("%d:%d", d.Line, d.Column)
			if d.Code != tc.code || !(pos == tc.pos || strings.HasSuffix(tc.pos, ":") && strings.HasPrefix(pos, tc.pos)) || !strings.Contains(d.Message, tc.msg) || !strings.Contains(d.Hint, tc.hint) || d.Severity != Error {
				t.Errorf("got  %s [%s] %s\nwant %s:%s [%s] message ~ %q, hint ~ %q\nall: %v", d, d.Code, pos, d.File, tc.pos, tc.code, tc.msg, tc.hint, res.Diagnostics)
			}
			if !strings.HasPrefix(d.String(), "f.cedar:"+pos+": ") {
				t.Errorf("rendering %q does not start with the position", d.String())
			}
			fixed := c.Check([]File{{Name: "f.cedar", Data: []byte(tc.fixed)}})
			if len(fixed.Diagnostics) > 0 {
				t.Errorf("the fixed version is not clean: %v", fixed.Diagnostics)
			}
		})
	}
}

// TestCorpusOutput prints the corpus diagnostics (go test -run CorpusOutput -v).
func TestCorpusOutput(t *testing.T) {
	if os.Getenv("KCEDAR_CORPUS_OUTPUT") == "" {
		t.Skip("set KCEDAR_CORPUS_OUTPUT=1 to print")
	}
	c := testChecker(t)
	for _, tc := range corpus {
		res := c.Check([]File{{Name: "f.cedar", Data: []byte(tc.broken)}})
		for _, d := range res.Diagnostics {
			t.Logf("%s: %s", tc.name, d)
		}
	}
}
