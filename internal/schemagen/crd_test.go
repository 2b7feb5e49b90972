package schemagen

import (
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	cedarlib "github.com/cedar-policy/cedar-go"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	xast "github.com/kcedar/kcedar/internal/lib/cedarx/ast"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/resolved"
	"github.com/kcedar/kcedar/internal/lib/cedarx/schema/validate"
	"github.com/kcedar/kcedar/internal/testing/crdtest"
)

// loadCRDs reads the test CRDs in testdata/crds.
func loadCRDs(t testing.TB) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crds, err := crdtest.Load("testdata/crds")
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) < 4 {
		t.Fatalf("only %d test CRDs", len(crds))
	}
	return crds
}

// withCRDs adds the CRDs to docs the way kube-apiserver publishes them.
func withCRDs(t testing.TB, docs *Documents, crds []*apiextensionsv1.CustomResourceDefinition) *Documents {
	t.Helper()
	groups, openapi, err := crdtest.Publish(crds)
	if err != nil {
		t.Fatal(err)
	}
	docs.APIs.Items = append(docs.APIs.Items, groups...)
	for p, d := range openapi {
		docs.OpenAPI[p] = d
	}
	return docs
}

var (
	certificates   = ResourceKey{Group: "cert-manager.io", Resource: "certificates"}
	httproutes     = ResourceKey{Group: "gateway.networking.k8s.io", Resource: "httproutes"}
	applications   = ResourceKey{Group: "argoproj.io", Resource: "applications"}
	postgresqlinst = ResourceKey{Group: "database.example.org", Resource: "postgresqlinstances"}
)

// crdSchema is the embedded default plus the test CRDs.
func crdSchema(t testing.TB) *Schema {
	t.Helper()
	docs, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Generate(withCRDs(t, docs, loadCRDs(t)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCRDs(t *testing.T) {
	s := crdSchema(t)
	_, _, fromText, fromJSON := resolveBoth(t, s)

	// Entities, subresources and served versions.
	for key, want := range map[ResourceKey]struct {
		entity   string
		versions []string
	}{
		certificates:   {"io::cert_manager::certificates", []string{"v1", "v1beta1"}},
		httproutes:     {"io::k8s::networking::gateway::httproutes", []string{"v1", "v1beta1"}},
		applications:   {"io::argoproj::applications", []string{"v1alpha1"}},
		postgresqlinst: {"org::example::database::postgresqlinstances", []string{"v1alpha1", "v1beta1"}},
	} {
		r, ok := s.Lookup(key.Group, key.Resource, "")
		if !ok {
			t.Errorf("%v missing", key)
			continue
		}
		if string(r.EntityType) != want.entity || !r.Namespaced {
			t.Errorf("%v: %s namespaced=%v", key, r.EntityType, r.Namespaced)
		}
		if got := sortedKeys(r.Versions); !slices.Equal(got, want.versions) {
			t.Errorf("%v: versions %v, want %v", key, got, want.versions)
		}
		for _, v := range want.versions {
			ov := r.Versions[v]
			if ov.APIVersion != key.Group+"/"+v {
				t.Errorf("%v %s: apiVersion %s", key, v, ov.APIVersion)
			}
			if ov.Name != ObjectTypeName(key.Group, v, ov.Kind) {
				t.Errorf("%v %s: object type %s", key, v, ov.Name)
			}
		}
		if key != applications {
			st, ok := s.Lookup(key.Group, key.Resource, "status")
			if !ok || !reflect_equalKeys(st.Versions, r.Versions) {
				t.Errorf("%v/status missing or with other versions", key)
			}
		}
		for _, rs := range []*resolved.Schema{fromText, fromJSON} {
			e, ok := rs.Entities[r.EntityType]
			if !ok {
				t.Errorf("%s not printed", r.EntityType)
				continue
			}
			if string(e.Annotations[AnnotationAPIGroup]) != key.Group {
				t.Errorf("%s: annotations %v", r.EntityType, e.Annotations)
			}
			for _, v := range want.versions {
				if _, err := resolvedAttr(rs, r.EntityType, "object", v, "spec"); err != nil {
					t.Errorf("%s: %v", r.EntityType, err)
				}
				if _, err := resolvedAttr(rs, r.EntityType, "oldObject", v, "status"); err != nil {
					t.Errorf("%s: %v", r.EntityType, err)
				}
			}
		}
	}

	// Typed fields per served version.
	for _, c := range []struct {
		key     ResourceKey
		version string
		path    string
		want    string
		opt     bool
	}{
		// cert-manager
		{certificates, "v1", "spec.secretName", "String", false},
		{certificates, "v1", "spec.issuerRef.name", "String", false},
		{certificates, "v1", "spec.issuerRef.kind", "String", true},
		{certificates, "v1", "spec.dnsNames", "Set<String>", true},
		{certificates, "v1", "spec.privateKey.size", "Long", true},
		{certificates, "v1", "spec.privateKey.algorithm", "String", true},
		{certificates, "v1", "spec.isCA", "Bool", true},
		{certificates, "v1", "spec.secretTemplate.labels", "Map:k8s::StringMap", true},
		{certificates, "v1", "spec.keystores.pkcs12.passwordSecretRef.key", "String", true},
		{certificates, "v1", "spec.additionalOutputFormats.[].type", "String", false},
		{certificates, "v1", "spec.nameConstraints.permitted.dnsDomains", "Set<String>", true},
		{certificates, "v1", "status.notAfter", "datetime", true},
		{certificates, "v1", "status.conditions.[].lastTransitionTime", "datetime", true},
		{certificates, "v1", "status.conditions.[].observedGeneration", "Long", true},
		{certificates, "v1", "status.conditions.[].status", "String", false},
		{certificates, "v1beta1", "spec.keyAlgorithm", "String", true},
		{certificates, "v1beta1", "spec.keySize", "Long", true},
		{certificates, "v1beta1", "status.notAfter", "datetime", true},
		// Gateway API
		{httproutes, "v1", "spec.hostnames", "Set<String>", true},
		{httproutes, "v1", "spec.parentRefs.[].name", "String", false},
		{httproutes, "v1", "spec.parentRefs.[].port", "Long", true},
		{httproutes, "v1", "spec.rules.[].matches.[].path.type", "String", true},
		{httproutes, "v1", "spec.rules.[].matches.[].headers.[].value", "String", false},
		{httproutes, "v1", "spec.rules.[].filters.[].requestHeaderModifier.set.[].name", "String", false},
		{httproutes, "v1", "spec.rules.[].filters.[].requestMirror.fraction.numerator", "Long", false},
		{httproutes, "v1", "spec.rules.[].backendRefs.[].filters.[].urlRewrite.path.replacePrefixMatch", "String", true},
		{httproutes, "v1", "spec.rules.[].backendRefs.[].weight", "Long", true},
		{httproutes, "v1", "spec.rules.[].filters.[].requestRedirect.statusCode", "Long", true},
		{httproutes, "v1", "status.parents.[].conditions.[].lastTransitionTime", "datetime", false},
		{httproutes, "v1", "status.parents.[].parentRef.sectionName", "String", true},
		{httproutes, "v1beta1", "spec.rules.[].matches.[].method", "String", true},
		{httproutes, "v1beta1", "spec.rules.[].timeouts.request", "String", true},
		// Argo CD
		{applications, "v1alpha1", "spec.project", "String", false},
		{applications, "v1alpha1", "spec.source.repoURL", "String", false},
		{applications, "v1alpha1", "spec.source.helm.valuesObject", "{}", true},
		{applications, "v1alpha1", "spec.source.helm.parameters.[].forceString", "Bool", true},
		{applications, "v1alpha1", "spec.source.kustomize.replicas.[].count", "String", false},
		{applications, "v1alpha1", "spec.source.kustomize.commonLabels", "Map:k8s::StringMap", true},
		{applications, "v1alpha1", "spec.source.plugin.parameters.[].map", "Map:k8s::StringMap", true},
		{applications, "v1alpha1", "spec.source.directory.jsonnet.tlas.[].code", "Bool", true},
		{applications, "v1alpha1", "spec.sources.[].helm.releaseName", "String", true},
		{applications, "v1alpha1", "spec.syncPolicy.retry.limit", "Long", true},
		{applications, "v1alpha1", "spec.syncPolicy.managedNamespaceMetadata.labels", "Map:k8s::StringMap", true},
		{applications, "v1alpha1", "operation.sync.revision", "String", true},
		{applications, "v1alpha1", "status.history.[].id", "Long", false},
		{applications, "v1alpha1", "status.history.[].source.path", "String", true},
		{applications, "v1alpha1", "status.operationState.operation", "{}", false},
		{applications, "v1alpha1", "status.reconciledAt", "datetime", true},
		{applications, "v1alpha1", "status.sync.comparedTo.destination.server", "String", true},
		// Crossplane claim
		{postgresqlinst, "v1alpha1", "spec.parameters.storageGB", "Long", false},
		{postgresqlinst, "v1alpha1", "spec.compositionSelector.matchLabels", "Map:k8s::StringMap", false},
		{postgresqlinst, "v1alpha1", "spec.compositeDeletePolicy", "String", true},
		{postgresqlinst, "v1beta1", "spec.parameters.storage", "String", false},
		{postgresqlinst, "v1beta1", "spec.parameters.highAvailability", "Bool", true},
		{postgresqlinst, "v1beta1", "spec.parameters.databases.{}.owner", "String", false},
		{postgresqlinst, "v1beta1", "spec.parameters.databases.{}.connectionLimit", "Long", true},
		{postgresqlinst, "v1beta1", "spec.parameters.databases.{}.extensions", "Set<String>", true},
		{postgresqlinst, "v1beta1", "spec.parameters.tags", "Map:k8s::StringMap", true},
		{postgresqlinst, "v1beta1", "spec.parameters.extraConfig", "{}", true},
		{postgresqlinst, "v1beta1", "spec.parameters.network.vpcId", "String", true},
		{postgresqlinst, "v1beta1", "spec.parameters.network.subnetIds", "Set<String>", true},
		{postgresqlinst, "v1beta1", "spec.parameters.template.apiVersion", "String", false},
		{postgresqlinst, "v1beta1", "spec.parameters.template.kind", "String", false},
		{postgresqlinst, "v1beta1", "spec.parameters.template.metadata.labels", "Map:k8s::StringMap", true},
		{postgresqlinst, "v1beta1", "spec.publishConnectionDetailsTo.metadata.annotations", "Map:k8s::StringMap", true},
		{postgresqlinst, "v1beta1", "status.conditions.[].lastTransitionTime", "datetime", false},
		{postgresqlinst, "v1beta1", "status.port", "Long", true},
	} {
		path := strings.Split(c.path, ".")
		typ, attr := objectField(t, s, c.key, c.version, path...)
		got := typeKey(typ)
		if len(got) > 2 && strings.HasPrefix(got, "{") && c.want != "{}" {
			got = "record"
		}
		if got != c.want {
			t.Errorf("%s %s %s: %s, want %s", c.key.Resource, c.version, c.path, got, c.want)
		}
		if attr != nil && attr.Optional != c.opt {
			t.Errorf("%s %s %s: optional=%v", c.key.Resource, c.version, c.path, attr.Optional)
		}
	}

	// Version differences are kept apart.
	for _, c := range []struct {
		key     ResourceKey
		version string
		path    string
	}{
		{certificates, "v1beta1", "spec.privateKey"},
		{certificates, "v1", "spec.keyAlgorithm"},
		{postgresqlinst, "v1alpha1", "spec.parameters.databases"},
		{postgresqlinst, "v1beta1", "spec.parameters.storageGB"},
	} {
		r := s.Resources[c.key]
		if _, _, err := modelType(s, r.Versions[c.version].Fields, strings.Split(c.path, ".")...); err == nil {
			t.Errorf("%s %s has %s", c.key.Resource, c.version, c.path)
		}
	}

	// Enums survive.
	_, attr := objectField(t, s, certificates, "v1", "spec", "privateKey", "algorithm")
	if !slices.Equal(attr.Enum, []string{"RSA", "ECDSA", "Ed25519"}) {
		t.Errorf("privateKey.algorithm enum %q", attr.Enum)
	}
	_, attr = objectField(t, s, certificates, "v1", "spec", "usages")
	if !slices.Contains(attr.Enum, "digital signature") {
		t.Errorf("usages enum %q", attr.Enum)
	}

	// What stays untyped is reported, with its path.
	for _, w := range [][]string{
		{"io.argoproj.v1alpha1.Application.spec.source.helm.valuesObject:", "preserve-unknown-fields"},
		{"io.argoproj.v1alpha1.Application.status.operationState.operation:", "preserve-unknown-fields"},
		{"org.example.database.v1beta1.PostgreSQLInstance.spec.parameters.template:", "preserve-unknown-fields"},
		{"org.example.database.v1beta1.PostgreSQLInstance.spec.parameters.network:", "preserve-unknown-fields"},
		{"org.example.database.v1beta1.PostgreSQLInstance.spec.parameters.extraConfig:", "preserve-unknown-fields"},
	} {
		if !hasWarning(s, w...) {
			t.Errorf("no warning %q", w)
		}
	}

	// The map of objects is a named map entity type.
	typ, _ := objectField(t, s, postgresqlinst, "v1beta1", "spec", "parameters", "databases")
	m, ok := typ.(*MapType)
	if !ok || m.EntityType != "k8s::maps::org::example::database::v1beta1::PostgreSQLInstance_spec_parameters_databasesMap" {
		t.Errorf("databases: %#v", typ)
	}

	// Actions cover the CRD resources.
	for _, v := range []string{"create", "get", "list", "watch", "deletecollection"} {
		if !slices.Contains(s.Resources[httproutes].Verbs, v) {
			t.Errorf("httproutes lack %s", v)
		}
	}
	roundTripModel(t, s)
}

func reflect_equalKeys[V any](a, b map[string]V) bool {
	ka, kb := sortedKeys(a), sortedKeys(b)
	return slices.Equal(ka, kb)
}

// The CRD objects are printed once per served version (k8s::objects::...),
// however many entities (resource, status) use them.
func TestCRDObjectTypesShared(t *testing.T) {
	s := crdSchema(t)
	a := s.CedarAST()
	var names []string
	for ns, n := range a.Namespaces {
		if strings.HasPrefix(string(ns), ObjectsNamespace+"::io::cert_manager") {
			for name := range n.CommonTypes {
				names = append(names, string(ns)+"::"+string(name))
			}
		}
	}
	sort.Strings(names)
	want := []string{"k8s::objects::io::cert_manager::v1::Certificate", "k8s::objects::io::cert_manager::v1beta1::Certificate"}
	if !slices.Equal(names, want) {
		t.Errorf("object types %v, want %v", names, want)
	}
	if s.Resources[certificates].Versions["v1"] != s.Resources[ResourceKey{Group: "cert-manager.io", Resource: "certificates", Subresource: "status"}].Versions["v1"] {
		t.Error("certificates and certificates/status do not share their object type")
	}
}

func TestCRDDeterminism(t *testing.T) {
	a, _ := crdSchema(t).MarshalCedar()
	b, _ := crdSchema(t).MarshalCedar()
	if string(a) != string(b) {
		t.Fatal("not deterministic")
	}
}

// The policy examples of docs/schema.md validate (strict mode) against the
// default schema plus the test CRDs.
func TestDocExamplesValidate(t *testing.T) {
	doc, err := os.ReadFile("../../docs/schema.md")
	if err != nil {
		t.Skip("docs/schema.md not found:", err)
	}
	_, examples, ok := strings.Cut(string(doc), "\n## Examples\n")
	if !ok {
		t.Fatal("docs/schema.md has no Examples section")
	}
	_, block, ok := strings.Cut(examples, "```cedar\n")
	if !ok {
		t.Fatal("no cedar block in Examples")
	}
	block, _, _ = strings.Cut(block, "```")
	_, _, rs, _ := resolveBoth(t, crdSchema(t))
	v := validate.New(rs)
	ps, err := cedarlib.NewPolicyListFromBytes("schema.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) < 8 {
		t.Fatalf("only %d example policies", len(ps))
	}
	for i, p := range ps {
		if err := v.Policy("example", (*xast.Policy)(p.AST())); err != nil {
			t.Errorf("example %d: %v", i+1, err)
		}
	}
}
