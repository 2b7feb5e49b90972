package cedar

import (
	"context"

	"github.com/kcedar/kcedar/internal/engine"
)

// Details describe how an Authorizer made a decision, for metrics, logs and
// traces: put one in the context with WithDetails, and every decision the
// Authorizer makes with that context fills it, also when the Authorizer is
// called through another (a union holding it). A Details is for one request
// at a time.
type Details struct {
	// Policies are the ids of the policies that decided, sorted; for a
	// decision that depends on conditions, the policies of the conditions.
	Policies []string
	// Errors are the policies' evaluation errors behind the answer. They
	// are part of the decision (a forbid that fails to evaluate denies, a
	// permit that fails allows nothing), not a failure of the Authorizer.
	Errors []string
	// Audit are the audit policies that would have changed the decision.
	Audit []AuditReport
	// Cache is the decision cache's part: "hit", "miss", or "none" (not
	// looked up); "" when no decision was made.
	Cache string
	// Candidates is the number of candidate policies evaluated.
	Candidates int
	// Generation is the generation of the policy set that decided.
	Generation uint64
}

// AuditReport is a policy annotated @enforcement("audit") that would have
// changed a decision had it been enforced.
type AuditReport struct {
	Policy string `json:"policy"`
	Effect string `json:"effect"` // permit or forbid
	// Would is the decision with the policy enforced: deny, allow or
	// conditional.
	Would string `json:"would"`
	// Residual is the policy's condition of a conditional finding, in Cedar.
	Residual string `json:"residual,omitempty"`
}

type detailsKey struct{}

// WithDetails returns ctx carrying d, which the decisions made with it fill:
//
//	d := new(cedar.Details)
//	decision, reason, err := authz.Authorize(cedar.WithDetails(ctx, d), attrs)
func WithDetails(ctx context.Context, d *Details) context.Context {
	return context.WithValue(ctx, detailsKey{}, d)
}

// detailsOf is the Details ctx carries, nil for none.
func detailsOf(ctx context.Context) *Details {
	d, _ := ctx.Value(detailsKey{}).(*Details)
	return d
}

// fill records d, decided by the engine of generation gen with st, in
// details (nil: not wanted).
func (details *Details) fill(d engine.Decision, st *engine.Stats, gen uint64) {
	if details == nil {
		return
	}
	*details = Details{Cache: st.Cache.String(), Candidates: st.Candidates, Generation: gen}
	if ps := d.Policies(); len(ps) > 0 {
		details.Policies = make([]string, len(ps))
		for i, p := range ps {
			details.Policies[i] = p.ID
		}
	}
	if errs := d.Errors(); len(errs) > 0 {
		details.Errors = make([]string, len(errs))
		for i, err := range errs {
			details.Errors[i] = err.Error()
		}
	}
	for _, r := range engine.AuditReports(d) {
		details.Audit = append(details.Audit, AuditReport(r))
	}
}

// answeredWith records that the answer is the concrete decision Encode
// made of a conditional one, whose evaluation errors (those of encoding
// included, joined) replace the decision's.
func (details *Details) answeredWith(evaluationError string) {
	if details == nil {
		return
	}
	details.Errors = nil
	if evaluationError != "" {
		details.Errors = []string{evaluationError}
	}
}
