package conditions

import (
	"context"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/wire"
)

// AdmissionVerbs lists the verbs an admission operation may have been
// authorized as: a create by create, or by an update or patch that creates;
// an update by update or patch; a delete by delete or deletecollection (per
// object); a connect by the verb of its HTTP method (get, create, update,
// patch, delete: proxy subresources take them all). An UPDATE's options
// cannot tell update from patch: kube-apiserver admits a patch with
// UpdateOptions (k8s.io/apiserver endpoints/handlers/patch.go,
// patchToUpdateOptions). An unknown operation has none.
func AdmissionVerbs(operation string) []string {
	switch operation {
	case "CREATE":
		return []string{"create", "update", "patch"}
	case "UPDATE":
		return []string{"update", "patch"}
	case "DELETE":
		return []string{"delete", "deletecollection"}
	case "CONNECT":
		return []string{"get", "create", "update", "patch", "delete"}
	}
	return nil
}

// sarName is the name the SubjectAccessReview carried for verb: creates and
// collection deletes have none.
func sarName(verb, name string) string {
	if verb == "create" || verb == "deletecollection" {
		return ""
	}
	return name
}

// Admit is the admission-webhook enforcement of conditions for clusters
// without conditional authorization. With --admission-enforcement the
// authorizer answered Allow for a conditional allow; here the same conditions
// are computed again (from this engine's policies) and evaluated against the
// admission data. The webhook does not learn which verb was authorized, so it
// enforces the conditional allows of every verb the operation may stand for:
// a request is refused if any of them does not evaluate to Allow.
func (e *Engine) Admit(ctx context.Context, data *AdmissionData) engine.Decision {
	if data.User == nil {
		return engine.Denied(nil, nil).WithReason("kcedar: the admission request has no user")
	}
	base := entities.Request{User: *data.User, ResourceRequest: true, APIGroup: data.APIGroup, APIVersion: data.APIVersion,
		Resource: data.Resource, Subresource: data.Subresource, Namespace: data.Namespace}
	if entities.ResolveTarget(e.Schema(), &base).Resource == nil {
		return engine.Allowed(nil, nil).WithReason("kcedar: not a resource kcedar types")
	}
	for _, verb := range AdmissionVerbs(data.Operation) {
		req := base
		req.Verb, req.Name = verb, sarName(verb, data.Name)
		d := e.Authorize(ctx, &req)
		if !d.IsConditional() || len(d.AllowConditions()) == 0 {
			continue // decided at authorization time; nothing to enforce
		}
		enc := e.Encode(d, RequestBinding(&req))
		if enc.Type != wire.DecisionTypeConditionsMap || len(enc.ConditionsMap.AllowConditions) == 0 {
			continue // the authorizer answered this verb unconditionally too
		}
		if v := e.eval.EvaluateMap(enc.ConditionsMap, data); !v.IsAllowed() {
			return engine.Denied(v.Policies(), v.Errors()).WithReason(v.Reason())
		}
	}
	return engine.Allowed(nil, nil).WithReason("kcedar: conditions hold")
}

// DefaultOperation is the admission operation a verb arrives as.
func DefaultOperation(verb, subresource string) string {
	switch subresource {
	case "exec", "attach", "portforward", "proxy":
		return "CONNECT"
	}
	switch verb {
	case "create":
		return "CREATE"
	case "update", "patch":
		return "UPDATE"
	case "delete", "deletecollection":
		return "DELETE"
	}
	return ""
}
