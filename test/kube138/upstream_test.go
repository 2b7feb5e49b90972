package kube138

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/authorizer/conditionsenforcer"
	authzconfig "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/apis/apiserver/load"
	apiservervalidation "k8s.io/apiserver/pkg/apis/apiserver/validation"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authorizationcel "k8s.io/apiserver/pkg/authorization/cel"
	authorizationmetrics "k8s.io/apiserver/pkg/authorization/metrics"
	"k8s.io/apiserver/pkg/authorization/union"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	webhookutil "k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/apiserver/plugin/pkg/authorizer/webhook"
	webhookmetrics "k8s.io/apiserver/plugin/pkg/authorizer/webhook/metrics"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// The authorizer modes kube-apiserver 1.38 knows
// (pkg/kubeapiserver/authorizer/modes) and the one it lets repeat
// (pkg/kubeapiserver/authorizer/config.go), for validating an
// AuthorizationConfiguration as kube-apiserver's LoadAndValidateData does.
var (
	authorizerModes       = sets.New("AlwaysAllow", "AlwaysDeny", "ABAC", "Webhook", "RBAC", "Node")
	repeatableAuthorizers = sets.New("Webhook")
)

// privilegedGroupAuthorizerName is the name kube-apiserver's reload.go gives
// the authorizer of system:masters it puts first in its union.
const privilegedGroupAuthorizerName = "system-privileged-group.authorizer.kubernetes.io"

// loadAuthorizationConfiguration reads the AuthorizationConfiguration at
// path and validates it as kube-apiserver 1.38's LoadAndValidateData does:
// upstream's loader (defaults included) and validation, with the CEL
// compiler kube-apiserver uses for match conditions, and its rule that an
// authorizer of another type than Webhook is named after its type. It
// returns the configuration and everything upstream objects to.
func loadAuthorizationConfiguration(t testing.TB, path string) (*authzconfig.AuthorizationConfiguration, []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := load.LoadFromData(data)
	if err != nil {
		return nil, []string{fmt.Sprintf("loading: %v", err)}
	}
	var problems []string
	for _, e := range apiservervalidation.ValidateAuthorizationConfiguration(authorizationcel.NewDefaultCompiler(), nil, cfg, authorizerModes, repeatableAuthorizers) {
		problems = append(problems, e.Error())
	}
	for _, a := range cfg.Authorizers {
		if a.Type != authzconfig.AuthorizerType("Webhook") && a.Name != strings.ToLower(string(a.Type)) {
			problems = append(problems, fmt.Sprintf("expected name %s for authorizer %s instead of %s", strings.ToLower(string(a.Type)), a.Type, a.Name))
		}
	}
	return cfg, problems
}

// webhookMetrics are the webhook authorizer's and its matcher's metrics, as
// kube-apiserver's reload.go combines them (here recording nothing).
type webhookMetrics struct {
	webhookmetrics.NoopRequestMetrics
	webhookmetrics.NoopWebhookMetrics
	authorizationcel.NoopMatcherMetrics
}

// webhookFromConfiguration builds the webhook authorizer of a as
// kube-apiserver 1.38's reload.go (newForConfig) does: the SubjectAccessReview
// client from the kubeconfig's current context, the
// AuthorizationConditionsReview client from conditionsReview's context (with
// the feature gate on), the timeout, the failure policy, the cache TTLs, the
// compiled match conditions and the default retry backoff, instrumented with
// authorization metrics. Both clients' traffic is recorded in wire.
func webhookFromConfiguration(t testing.TB, a authzconfig.AuthorizerConfiguration, wire *wireLog) (authorizer.Authorizer, *authorizationcel.CELMatcher) {
	t.Helper()
	w := a.Webhook
	sarConfig, err := webhookutil.LoadKubeconfig(*w.ConnectionInfo.KubeConfigFile, nil)
	if err != nil {
		t.Fatalf("webhook %s: %v", a.Name, err)
	}
	if w.Timeout.Duration != 0 {
		sarConfig.Timeout = w.Timeout.Duration
	}
	decisionOnError := authorizer.DecisionDeny
	if w.FailurePolicy == authzconfig.FailurePolicyNoOpinion {
		decisionOnError = authorizer.DecisionNoOpinion
	}
	authorizedTTL, unauthorizedTTL := w.AuthorizedTTL.Duration, w.UnauthorizedTTL.Duration
	if !w.CacheAuthorizedRequests {
		authorizedTTL = 0
	}
	if !w.CacheUnauthorizedRequests {
		unauthorizedTTL = 0
	}
	var reviewConfig *rest.Config
	var reviewVersion string
	if cr := w.ConditionsReview; cr != nil && utilfeature.DefaultFeatureGate.Enabled(genericfeatures.ConditionalAuthorization) {
		if reviewConfig, err = webhookutil.LoadKubeconfigWithContext(*w.ConnectionInfo.KubeConfigFile, cr.KubeConfigContextName, nil); err != nil {
			t.Fatalf("webhook %s: conditions review context %q: %v", a.Name, cr.KubeConfigContextName, err)
		}
		reviewVersion = cr.Version
		if w.Timeout.Duration != 0 {
			reviewConfig.Timeout = w.Timeout.Duration
		}
		reviewConfig.Wrap(wire.wrap)
	}
	sarConfig.Wrap(wire.wrap)
	metrics := webhookMetrics{}
	matcher, err := apiservervalidation.NewWebhookMatcher(authorizationcel.NewDefaultCompiler(), w.MatchConditions, a.Name, metrics)
	if err != nil {
		t.Fatalf("webhook %s: match conditions: %v", a.Name, err)
	}
	wh, err := webhook.New(sarConfig, w.SubjectAccessReviewVersion, authorizedTTL, unauthorizedTTL, *webhook.DefaultRetryBackoff(),
		decisionOnError, matcher, a.Name, metrics, reviewConfig, reviewVersion)
	if err != nil {
		t.Fatalf("webhook %s: %v", a.Name, err)
	}
	return authorizationmetrics.InstrumentedAuthorizer(string(a.Type), a.Name, wh), matcher
}

// conditionsAuthorizerName is the name of the conditional authorizer the
// tests put in front of kcedar in the union.
const conditionsAuthorizerName = "freeze.kube138.test"

// unionOf is kube-apiserver's union for cfg, as reload.go builds it: the
// system:masters authorizer first, then the configured authorizers in
// order. The webhook named webhookName is kcedar; the others stand in for
// kube-apiserver's own: Node has no opinion (nodeStandIn), RBAC grants from
// a fixed table (rbacStandIn). The freeze authorizer, a conditional
// authorizer of its own, sits right before kcedar.
func unionOf(t *testing.T, cfg *authzconfig.AuthorizationConfiguration, webhookName string, kcedar authorizer.Authorizer) authorizer.Authorizer {
	t.Helper()
	chain := []union.NamedAuthorizer{{AuthorizerName: privilegedGroupAuthorizerName, Authorizer: authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)}}
	for _, a := range cfg.Authorizers {
		var az authorizer.Authorizer
		switch {
		case a.Type == "Webhook" && a.Name == webhookName:
			chain = append(chain, union.NamedAuthorizer{AuthorizerName: conditionsAuthorizerName, Authorizer: freezeAuthorizer{}})
			az = kcedar
		case a.Type == "Node":
			az = nodeStandIn
		case a.Type == "RBAC":
			az = rbacStandIn
		default:
			t.Fatalf("authorizer %s of type %s: no stand-in", a.Name, a.Type)
		}
		chain = append(chain, union.NamedAuthorizer{AuthorizerName: a.Name, Authorizer: authorizationmetrics.InstrumentedAuthorizer(string(a.Type), a.Name, az)})
	}
	u, err := union.New(chain...)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// nodeStandIn is the Node authorizer for the users of these tests, which are
// not nodes it knows: no opinion.
var nodeStandIn = authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionNoOpinion, "", nil
})

// Mirrored from k8s.io/kubernetes v1.38.0-beta.0, which cannot be imported
// (its staging modules are not all served): the verbs admission sees
// (pkg/controlplane/apiserver/config.go) and the resources excluded from
// admission (pkg/kubeapiserver/admission/exclusion).
var (
	admissionVerbs        = sets.New("create", "update", "patch", "delete", "deletecollection")
	excludedFromAdmission = sets.New(
		schema.GroupResource{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
		schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"},
		schema.GroupResource{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
		schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
		schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
		schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
	)
)

// conditionalRequestClassifier is kube-apiserver 1.38's
// ConditionalAuthorizationRequestClassifier (pkg/controlplane/apiserver,
// conditionalRequestClassifier): only resource requests whose verb admission
// sees, on resources admission is not excluded from, are authorized with
// ConditionsAwareAuthorize; everything else with Authorize.
func conditionalRequestClassifier(attrs authorizer.Attributes) bool {
	if !attrs.IsResourceRequest() {
		return false
	}
	if excludedFromAdmission.Has(schema.GroupResource{Group: attrs.GetAPIGroup(), Resource: attrs.GetResource()}) {
		return false
	}
	return admissionVerbs.Has(attrs.GetVerb())
}

// newConditionsEnforcer is the AuthorizationConditionsEnforcer admission
// plugin, initialized with the feature gates as kube-apiserver's admission
// initializer does.
func newConditionsEnforcer(t *testing.T) admission.ValidationInterface {
	t.Helper()
	p := conditionsenforcer.NewConditionalAuthorizationEnforcer()
	p.InspectFeatureGates(utilfeature.DefaultFeatureGate)
	if err := p.ValidateInitialization(); err != nil {
		t.Fatal(err)
	}
	return p
}

// objectInterfaces convert admission's objects; the tests hand them over
// already in their external version, as kube-apiserver's admission versions
// them for the webhook.
var objectInterfaces = admission.NewObjectInterfacesFromScheme(scheme.Scheme)
