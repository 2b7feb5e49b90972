package policyobjects

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cedar-policy/cedar-go/types"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// The escalation check: a write of a policy object may not give anyone
// access the writer could not use themselves, as RBAC's escalation check
// does for Roles. Every enforced permit the write adds or changes, and
// every enforced forbid it removes or changes, is read for the requests it
// can reach (cedarlang.ReachOf), and each (verb, resource) it reaches is
// checked with a SubjectAccessReview for the writer. The escalate verb on
// the policy object's resource bypasses the check.

// MaxEscalationChecks bounds the SubjectAccessReviews of one write.
const MaxEscalationChecks = 256

// AccessReviewer answers whether a user may do something, as the API
// server's authorizer chain would.
type AccessReviewer interface {
	Allowed(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (bool, error)
}

// SARReviewer asks the API server with a SubjectAccessReview.
type SARReviewer struct{ Client kubernetes.Interface }

// Allowed implements AccessReviewer.
func (r SARReviewer) Allowed(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (bool, error) {
	out, err := r.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	if out.Status.EvaluationError != "" && !out.Status.Allowed {
		return false, fmt.Errorf("%s", out.Status.EvaluationError)
	}
	return out.Status.Allowed, nil
}

// EscalationCheck checks writes of policy objects against their writer's
// own rights.
type EscalationCheck struct {
	Reviewer AccessReviewer
	// Timeout bounds all the checks of one write (default 8s, inside the
	// webhook's 10s).
	Timeout time.Duration
}

// permission is one thing a write gives: a verb on a resource (or a
// non-resource path), and the policy that gives it.
type permission struct {
	verb, group, resource, subresource, namespace, name string
	// nameSelector: the name comes from a metadata.name field selector
	// (a list or watch), as kube-apiserver's request-info resolver sends it.
	nameSelector bool
	path         string
	nonResource  bool
	policy       *cedarlang.Policy
}

func (p permission) key() string {
	return strings.Join([]string{p.verb, p.group, p.resource, p.subresource, p.namespace, p.name, p.path,
		fmt.Sprint(p.nonResource), fmt.Sprint(p.nameSelector)}, "\x00")
}

// write is one write of a policy object, as the check reads it.
type write struct {
	kind, namespace, name string
	old, new              []*cedarlang.Policy // nil: no object (create, delete)
}

// WriteRefusal is why a write is refused.
type WriteRefusal struct {
	Reason  string // escalation, too-many-checks, check-failed
	Message string
}

// Check returns nil when user may make the write, else why not; s maps
// Cedar entity types back to resources.
func (e *EscalationCheck) Check(ctx context.Context, user authenticationv1.UserInfo, w write, s *schemagen.Schema) *WriteRefusal {
	perms, err := e.permissions(w, s)
	if err != nil {
		return &WriteRefusal{Reason: "check-failed", Message: err.Error()}
	}
	if len(perms) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout())
	defer cancel()
	if ok, err := e.Reviewer.Allowed(ctx, e.escalateSpec(user, w)); err == nil && ok {
		return nil
	}
	if len(perms) > MaxEscalationChecks {
		return &WriteRefusal{Reason: "too-many-checks", Message: fmt.Sprintf("%s gives access that needs more than the %d checks against your own rights kcedar makes for one write; split the policies into several objects, or ask for escalate on %s", w.source(), MaxEscalationChecks, w.resource())}
	}
	missing, err := e.review(ctx, user, perms)
	if err != nil {
		return &WriteRefusal{Reason: "check-failed", Message: fmt.Sprintf("%s: checking your own rights failed, so the write is refused: %v", w.source(), err)}
	}
	if len(missing) == 0 {
		return nil
	}
	return &WriteRefusal{Reason: "escalation", Message: w.explain(missing)}
}

// CheckDeletion returns nil when user may make a write that can delete the
// object holding w.old (new is ignored): user holds delete on the object
// and what its enforced forbids block, else why not.
func (e *EscalationCheck) CheckDeletion(ctx context.Context, user authenticationv1.UserInfo, w write, s *schemagen.Schema) *WriteRefusal {
	w.new = nil
	spec := userSpec(user)
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: w.namespace, Verb: "delete", Group: Group, Resource: w.resource(), Name: w.name}
	ctx, cancel := context.WithTimeout(ctx, e.timeout())
	defer cancel()
	ok, err := e.Reviewer.Allowed(ctx, spec)
	switch {
	case err != nil:
		return &WriteRefusal{Reason: "check-failed", Message: fmt.Sprintf("%s: checking your own rights failed, so the write is refused: %v", w.source(), err)}
	case !ok:
		return &WriteRefusal{Reason: "escalation", Message: fmt.Sprintf("you may not delete %s (delete on %s)", w.source(), w.resource())}
	}
	return e.Check(ctx, user, w, s)
}

func (e *EscalationCheck) timeout() time.Duration {
	if e.Timeout > 0 {
		return e.Timeout
	}
	return 8 * time.Second
}

func (w write) source() string { return SourceName(w.kind, w.namespace, w.name) }

func (w write) resource() string {
	if w.kind == KindNamespaced {
		return ResourceNamespaced
	}
	return ResourceCluster
}

// escalateSpec asks whether user holds escalate on the object.
func (e *EscalationCheck) escalateSpec(user authenticationv1.UserInfo, w write) authorizationv1.SubjectAccessReviewSpec {
	spec := userSpec(user)
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: w.namespace, Verb: "escalate", Group: Group, Resource: w.resource(), Name: w.name}
	return spec
}

// userSpec asks as u, counting only rights u holds without conditions
// (entities.UnconditionalOnlyExtra): a right kcedar grants only on
// conditions is enforced in admission for u's own requests, but a policy
// written by u would grant it to others unconditionally, so it is never a
// right u may delegate. The extra key also keeps kube-apiserver's webhook
// cache from answering the check with a decision cached for u's own
// request (the cache is keyed on the whole review).
func userSpec(u authenticationv1.UserInfo) authorizationv1.SubjectAccessReviewSpec {
	spec := authorizationv1.SubjectAccessReviewSpec{User: u.Username, Groups: u.Groups, UID: u.UID}
	spec.Extra = make(map[string]authorizationv1.ExtraValue, len(u.Extra)+1)
	for k, v := range u.Extra {
		spec.Extra[k] = authorizationv1.ExtraValue(v)
	}
	spec.Extra[entities.UnconditionalOnlyExtra] = authorizationv1.ExtraValue{"true"}
	return spec
}

// review runs the SubjectAccessReviews of perms in parallel and returns
// those not allowed, in order. Any error fails the whole check.
func (e *EscalationCheck) review(ctx context.Context, user authenticationv1.UserInfo, perms []permission) ([]permission, error) {
	allowed := make([]bool, len(perms))
	errs := make([]error, len(perms))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, p := range perms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			allowed[i], errs[i] = e.Reviewer.Allowed(ctx, p.spec(user))
		}()
	}
	wg.Wait()
	var missing []permission
	for i, p := range perms {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if !allowed[i] {
			missing = append(missing, p)
		}
	}
	return missing, nil
}

func (p permission) spec(user authenticationv1.UserInfo) authorizationv1.SubjectAccessReviewSpec {
	spec := userSpec(user)
	if p.nonResource {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: p.path, Verb: p.verb}
		return spec
	}
	spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: p.namespace, Verb: p.verb, Group: p.group, Resource: p.resource, Subresource: p.subresource, Name: p.name}
	if p.nameSelector {
		// As kube-apiserver's webhook authorizer renders a list or watch
		// pinned by fieldSelector=metadata.name=<name>.
		spec.ResourceAttributes.FieldSelector = &authorizationv1.FieldSelectorAttributes{Requirements: []metav1.FieldSelectorRequirement{
			{Key: "metadata.name", Operator: metav1.FieldSelectorOpIn, Values: []string{p.name}}}}
	}
	return spec
}

// explain says what is missing, at most 10 permissions.
func (w write) explain(missing []permission) string {
	var parts []string
	for i, p := range missing {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(missing)-10))
			break
		}
		parts = append(parts, p.describe())
	}
	return fmt.Sprintf("%s gives access you do not hold yourself: %s; ask for it, or for escalate on %s", w.source(), strings.Join(parts, "; "), w.resource())
}

func (p permission) describe() string {
	what := p.verb + " "
	if p.verb == "*" {
		what = "every verb on "
	}
	switch {
	case p.nonResource && p.path == "*":
		what += "every non-resource URL"
	case p.group == "*" && p.resource == "*":
		what += "every resource"
		if p.namespace != "" {
			what += " in " + p.namespace
		} else {
			what += " in every namespace"
		}
	case p.nonResource:
		what += "non-resource URL " + p.path
	default:
		what += resourceName(p.group, p.resource, p.subresource)
		if p.name != "" {
			what += " named " + p.name
		}
		if p.namespace != "" {
			what += " in " + p.namespace
		} else {
			what += " in every namespace"
		}
	}
	pol := p.policy
	line := pol.Source
	if parts := strings.Split(pol.Source, ":"); len(parts) >= 3 {
		line = "line " + parts[len(parts)-2]
	}
	if pol.Effect == types.Forbid {
		return fmt.Sprintf("removing forbid %q (%s) gives back %s", pol.ID, line, what)
	}
	return fmt.Sprintf("permit %q (%s) grants %s", pol.ID, line, what)
}

func resourceName(group, resource, subresource string) string {
	r := resource
	if subresource != "" {
		r += "/" + subresource
	}
	if group == "" {
		return "core " + r
	}
	return r + "." + group
}

// permissions lists what w gives: the reach of every enforced permit of the
// new content that the old does not have, and of every enforced forbid of
// the old content that the new does not have.
func (e *EscalationCheck) permissions(w write, s *schemagen.Schema) ([]permission, error) {
	var given []*cedarlang.Policy
	given = append(given, added(w.new, w.old, types.Permit)...)
	given = append(given, added(w.old, w.new, types.Forbid)...)
	if len(given) == 0 {
		return nil, nil
	}
	if s == nil {
		return nil, fmt.Errorf("%s: no schema to check against yet", w.source())
	}
	byType := resourcesByType(s)
	seen := map[string]bool{}
	var out []permission
	for _, p := range given {
		for _, perm := range reachPermissions(p, w.namespace, byType) {
			if k := perm.key(); !seen[k] {
				seen[k] = true
				out = append(out, perm)
			}
		}
		if len(out) > MaxEscalationChecks {
			break // refused anyway: stop before hostile content costs more
		}
	}
	return out, nil
}

// added is the enforced policies of effect in from that to does not have
// (compared without annotations: an id or reason is not access).
func added(from, to []*cedarlang.Policy, effect types.Effect) []*cedarlang.Policy {
	have := map[string]bool{}
	for _, p := range to {
		if p.Effect == effect && enforced(p) {
			have[accessKey(p)] = true
		}
	}
	var out []*cedarlang.Policy
	for _, p := range from {
		if p.Effect == effect && enforced(p) && !have[accessKey(p)] {
			out = append(out, p)
		}
	}
	return out
}

// enforced reports whether p decides: it is not @enforcement("audit").
func enforced(p *cedarlang.Policy) bool { return p.Enforcement == cedarlang.Enforce }

func accessKey(p *cedarlang.Policy) string { return cedarlang.AccessText(p) }

// resourcesByType maps each resource entity type to its resource.
func resourcesByType(s *schemagen.Schema) map[types.EntityType]*schemagen.Resource {
	out := make(map[types.EntityType]*schemagen.Resource, len(s.Resources))
	for _, r := range s.Resources {
		out[r.EntityType] = r
	}
	return out
}

// reachPermissions is what p reaches, as SubjectAccessReviews in namespace
// ns ("": every namespace).
func reachPermissions(p *cedarlang.Policy, ns string, byType map[types.EntityType]*schemagen.Resource) []permission {
	r := cedarlang.ReachOf(p)
	verbs := r.Verbs
	if verbs == nil {
		verbs = []string{"*"}
	}
	names := r.Names
	if names == nil {
		names = []string{""}
	}
	paths := r.Paths
	if paths == nil {
		paths = []string{"*"}
	}
	var out []permission
	// Past MaxEscalationChecks the write is refused anyway: stop there, so
	// a policy reaching thousands of names and types costs no more.
	full := func() bool { return len(out) > MaxEscalationChecks }
	addResource := func(group, resource, subresource string) {
		for _, q := range requestsOf(verbs, names, subresource) {
			if full() {
				return
			}
			out = append(out, permission{verb: q.verb, group: group, resource: resource, subresource: subresource, namespace: ns,
				name: q.name, nameSelector: q.nameSelector, policy: p})
		}
	}
	addPaths := func() {
		for _, v := range verbs {
			for _, path := range paths {
				if full() {
					return
				}
				out = append(out, permission{verb: v, path: path, nonResource: true, policy: p})
			}
		}
	}
	if r.Types == nil {
		addResource("*", "*", "")
		addPaths()
		return out
	}
	for _, t := range slices.Sorted(slices.Values(r.Types)) {
		switch res, ok := byType[t]; {
		case t == schemagen.NonResourceURLType:
			addPaths()
		case t == schemagen.ResourceType:
			addResource("*", "*", "")
		case ok:
			sub := res.Key.Subresource
			if res.AnySubresource {
				sub = "*"
			}
			addResource(res.Key.Group, res.Key.Resource, sub)
		}
	}
	return out
}

// verbName is one (verb, name) a policy reaches, as authorization sees it.
type verbName struct {
	verb, name   string
	nameSelector bool
}

// requestsOf is the (verb, name) pairs of verbs and names (a name "": every
// name) on a resource with subresource, with each name where kube-apiserver
// sends one (k8s.io/apiserver's request-info resolver):
//   - a create of a top-level object and any deletecollection carry no name:
//     their URL is the collection's, so a policy on the name grants them only
//     as a condition that admission checks, and the writer needs the verb on
//     every name;
//   - a list or watch pinned by a metadata.name field selector carries it,
//     with the selector;
//   - everything else (get, update, patch, delete, and a create on a
//     subresource such as pods/eviction or pods/exec) carries the parent's.
//
// The verb "*" with names on a top-level resource stands for every verb on
// those names, so it adds the unnamed create and deletecollection it also
// grants.
func requestsOf(verbs, names []string, subresource string) []verbName {
	named := len(names) > 0 && names[0] != ""
	var out []verbName
	seen := map[verbName]bool{}
	add := func(q verbName) {
		if !seen[q] {
			seen[q] = true
			out = append(out, q)
		}
	}
	for _, v := range verbs {
		if named && (v == "deletecollection" || v == "create" && subresource == "") {
			add(verbName{verb: v})
			continue
		}
		for _, n := range names {
			add(verbName{verb: v, name: n, nameSelector: n != "" && (v == "list" || v == "watch")})
		}
		if named && v == "*" && subresource == "" {
			add(verbName{verb: "create"})
			add(verbName{verb: "deletecollection"})
		}
	}
	return out
}
