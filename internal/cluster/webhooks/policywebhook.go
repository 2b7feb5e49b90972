package webhooks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kcedar/kcedar/internal/cluster/policyobjects"
)

// The policy-object webhook: kcedar's /v1/validate-policy refuses invalid
// policy objects and writes that escalate the writer's rights. That guard
// only holds while the API server sends every CREATE, UPDATE and DELETE of
// both kinds to it and fails closed; PolicyVerifier watches that it does.

// PolicyWebhookPath is the path of kcedar's policy-object webhook.
const PolicyWebhookPath = "/v1/validate-policy"

// policyOperations are the writes the policy-object webhook must see.
var policyOperations = []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}

// CheckPolicyWebhook reports why vwc does not guard kcedar's policy
// objects: one of its webhooks must call kcedar's /v1/validate-policy with
// failurePolicy Fail, unnarrowed by selectors or match conditions, for
// CREATE, UPDATE and DELETE of cedarpolicies and namespacedcedarpolicies
// (kcedar.dev). nil when it does.
func CheckPolicyWebhook(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	var problems []string
	for _, wh := range vwc.Webhooks {
		err := checkPolicyWebhook(wh)
		if err == nil {
			return nil
		}
		problems = append(problems, fmt.Sprintf("webhook %s: %v", wh.Name, err))
	}
	if len(problems) == 0 {
		return fmt.Errorf("%s has no webhooks", vwc.Name)
	}
	return fmt.Errorf("%s does not send every create, update and delete of policy objects to kcedar's %s with failurePolicy Fail (%s)", vwc.Name, PolicyWebhookPath, strings.Join(problems, "; "))
}

func checkPolicyWebhook(wh admissionregistrationv1.ValidatingWebhook) error {
	if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Fail {
		return errors.New("failurePolicy is not Fail")
	}
	if p := webhookPath(wh.ClientConfig); !strings.HasSuffix(p, PolicyWebhookPath) {
		return fmt.Errorf("it does not call kcedar's %s (%q)", PolicyWebhookPath, p)
	}
	if narrowed(wh) {
		return errors.New("it is narrowed by selectors or match conditions")
	}
	for _, res := range []string{policyobjects.ResourceCluster, policyobjects.ResourceNamespaced} {
		for _, op := range policyOperations {
			if !slices.ContainsFunc(wh.Rules, func(r admissionregistrationv1.RuleWithOperations) bool { return ruleCovers(r, op, res) }) {
				return fmt.Errorf("no rule sends %s of %s.%s", op, res, policyobjects.Group)
			}
		}
	}
	return nil
}

// webhookPath is the URL or the service path a webhook calls.
func webhookPath(c admissionregistrationv1.WebhookClientConfig) string {
	switch {
	case c.URL != nil:
		return *c.URL
	case c.Service != nil && c.Service.Path != nil:
		return *c.Service.Path
	}
	return ""
}

// narrowed reports whether selectors or match conditions keep some
// requests from the webhook.
func narrowed(wh admissionregistrationv1.ValidatingWebhook) bool {
	nonEmpty := func(s *metav1.LabelSelector) bool {
		return s != nil && (len(s.MatchLabels) > 0 || len(s.MatchExpressions) > 0)
	}
	return nonEmpty(wh.NamespaceSelector) || nonEmpty(wh.ObjectSelector) || len(wh.MatchConditions) > 0
}

// ruleCovers reports whether r sends op on resource (of kcedar.dev, at the
// version kcedar serves, either scope) to the webhook.
func ruleCovers(r admissionregistrationv1.RuleWithOperations, op admissionregistrationv1.OperationType, resource string) bool {
	anyOf := func(list []string, want string) bool {
		return slices.Contains(list, want) || slices.Contains(list, "*")
	}
	scopeOK := r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes ||
		(*r.Scope == admissionregistrationv1.ClusterScope) == (resource == policyobjects.ResourceCluster)
	return (slices.Contains(r.Operations, op) || slices.Contains(r.Operations, admissionregistrationv1.OperationAll)) &&
		scopeOK && anyOf(r.APIGroups, policyobjects.Group) && anyOf(r.APIVersions, policyobjects.Version) &&
		(anyOf(r.Resources, resource) || slices.Contains(r.Resources, "*/*"))
}

// PolicyVerifier watches one ValidatingWebhookConfiguration, by name, and
// reports whether it guards kcedar's policy objects (CheckPolicyWebhook).
// Until its informer has listed the configuration, and whenever the
// configuration is missing or weakened, it is not verified. Its metric is
// kcedar_policy_webhook_verified.
type PolicyVerifier struct {
	// OnChange, if set, is called after the answer changes (and after the
	// first answer).
	OnChange func()

	name    string
	logger  *slog.Logger
	gauge   prometheus.Gauge
	decided chan struct{} // closed at the first answer
	once    sync.Once

	mu      sync.Mutex
	problem error // nil: verified
}

// NewPolicyVerifier returns a PolicyVerifier of the
// ValidatingWebhookConfiguration name; Run it.
func NewPolicyVerifier(name string, logger *slog.Logger) *PolicyVerifier {
	if logger == nil {
		logger = slog.Default()
	}
	return &PolicyVerifier{name: name, logger: logger, decided: make(chan struct{}),
		problem: fmt.Errorf("ValidatingWebhookConfiguration %s not read yet", name),
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kcedar_policy_webhook_verified",
			Help: "With --policy-objects: 1 when the ValidatingWebhookConfiguration that guards CedarPolicy and NamespacedCedarPolicy writes (kcedar's /v1/validate-policy, failurePolicy Fail, create, update and delete) is verified in place, else 0 (NamespacedCedarPolicy objects are then not served, unless --allow-unguarded-policy-objects).",
		})}
}

// Verified reports whether the webhook is verified in place now.
func (v *PolicyVerifier) Verified() bool { return v.Problem() == nil }

// Problem is why the webhook is not verified; nil when it is.
func (v *PolicyVerifier) Problem() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.problem
}

// Decided is closed once the verifier has its first answer: the
// configuration was listed (found or not).
func (v *PolicyVerifier) Decided() <-chan struct{} { return v.decided }

// Describe and Collect make the verifier's metric a prometheus.Collector.
func (v *PolicyVerifier) Describe(ch chan<- *prometheus.Desc) { v.gauge.Describe(ch) }

func (v *PolicyVerifier) Collect(ch chan<- prometheus.Metric) { v.gauge.Collect(ch) }

// Run watches the configuration with an informer (list and watch by a
// metadata.name field selector) on client until ctx ends.
func (v *PolicyVerifier) Run(ctx context.Context, client kubernetes.Interface) {
	watchConfiguration(ctx, client, v.name, func(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) { v.set(CheckPolicyWebhook(vwc)) }, v.set)
}

// set records the outcome of a check (nil: verified), logs and reports
// changes.
func (v *PolicyVerifier) set(problem error) {
	v.mu.Lock()
	first := false
	v.once.Do(func() { first = true })
	prev := v.problem
	v.problem = problem
	v.mu.Unlock()
	if problem == nil {
		v.gauge.Set(1)
	} else {
		v.gauge.Set(0)
	}
	changed := first || (prev == nil) != (problem == nil) || (problem != nil && problem.Error() != prev.Error())
	if !changed {
		return
	}
	if problem == nil {
		v.logger.Info("policy webhook verified: writes of policy objects are checked", "webhook", v.name)
	} else {
		v.logger.Error("policy webhook not in place: writes of policy objects may go unchecked", "webhook", v.name, "err", problem)
	}
	if first {
		close(v.decided)
	}
	if v.OnChange != nil {
		v.OnChange()
	}
}
