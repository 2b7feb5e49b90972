package generate

import (
	"context"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"github.com/kcedar/kcedar/internal/cedarlang"
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/lib/parallel"
	"github.com/kcedar/kcedar/internal/schemagen"
)

// Names is how a policy names the objects of its requests.
type Names string

// The Names modes.
const (
	// NamesExact lists every name the requests named.
	NamesExact Names = "exact"
	// NamesAuto lists the names up to MaxNames distinct names, and allows
	// every name above (unless that would allow a logged forbidden request).
	NamesAuto Names = "auto"
	// NamesAny allows every name (unless that would allow a logged forbidden
	// request).
	NamesAny Names = "any"
)

// DefaultMaxNames is MaxNames' default.
const DefaultMaxNames = 5

// Options configure a Generator.
type Options struct {
	// Existing is the policy set already in force (nil: none). Requests it
	// allows are not generated, nor those it allows on conditions (a
	// conditional allow: the log shows them allowed, so under the
	// conditions they were), and no policy is written that would allow one
	// of those without its conditions.
	Existing *cedarlang.PolicySet
	// Reach leaves out the requests kcedar never sees (nil: none left out
	// here; the reader leaves out system:masters members').
	Reach Reach
	// RBAC is the RBAC already granting, converted to Cedar (nil: none):
	// requests it allows the requester are not generated. RBACSource says
	// what it is, for the output's first comment.
	RBAC       *cedarlang.PolicySet
	RBACSource string
	// Generalize is how names with a generated or per-user part are
	// written (GeneralizeAuto when "").
	Generalize Generalize
	// SplitNamespaces keeps every policy in one namespace (or none), so
	// that a namespaced policy object can hold it: namespaces are not
	// merged into one policy.
	SplitNamespaces bool
	// GroupSubjects are the groups to write policies for instead of their
	// members, in order: a user is written as the first they belong to.
	GroupSubjects []string
	// IncludeSystem includes the system identities (SystemClass).
	IncludeSystem bool
	Names         Names
	MaxNames      int
	// Audit annotates every policy @enforcement("audit"): evaluated and
	// logged, never deciding, until the annotation is removed.
	Audit bool
}

// Reach says why kcedar never sees a request ("" if it does), from the
// SubjectAccessReview the webhook authorizer would send (replay.Reach).
type Reach interface {
	NotSeen(spec *authorizationv1.SubjectAccessReviewSpec) string
}

// Input is one logged request: as the authorizer saw it, and the logged
// decision.
type Input struct {
	Request *entities.Request
	Allowed bool
	Time    time.Time
	// Review is the SubjectAccessReview the webhook authorizer sends for
	// it, which Options.Reach decides on (nil: kcedar sees it).
	Review *authorizationv1.SubjectAccessReviewSpec
}

// Generator folds logged requests into permissions; Policies writes them.
type Generator struct {
	schema   *schemagen.Schema
	opts     Options
	existing *engine.Engine
	rbac     *engine.Engine
	stats    Stats
	// allowed are the permissions used and not allowed by Existing, per
	// user (and group subject).
	allowed map[userPerm]*evidence
	// forbidden are the logged forbidden permissions per subject (the user,
	// and each chosen group it was a member of).
	forbidden map[subjectPerm]bool
	// forbiddenReqs is a request of each forbidden permission of a user, to
	// check the generated policies with.
	forbiddenReqs map[userPerm]*entities.Request
	// conditionalReqs is a request of each permission the existing
	// policies allow a user only on conditions: no policy written may
	// allow one.
	conditionalReqs map[userPerm]*entities.Request
}

// Stats count what a Generator read.
type Stats struct {
	Requests  int `json:"requests"`
	Allowed   int `json:"allowed"`
	Forbidden int `json:"forbidden"`
	// AlreadyAllowed are allowed requests the existing policies allow.
	AlreadyAllowed int `json:"alreadyAllowed"`
	// ConditionallyAllowed are allowed requests the existing policies
	// allow on conditions.
	ConditionallyAllowed int `json:"conditionallyAllowed"`
	// AllowedByRBAC are allowed requests Options.RBAC allows.
	AllowedByRBAC int `json:"allowedByRBAC"`
	// NotSeen counts the requests kcedar never sees, by why (Reach).
	NotSeen map[string]int `json:"notSeen,omitempty"`
	// System counts the requests of system identities left out, by class.
	System map[string]int `json:"system,omitempty"`
}

// New returns a Generator writing policies against schema s.
func New(s *schemagen.Schema, opts Options) *Generator {
	if opts.Names == "" {
		opts.Names = NamesAuto
	}
	if opts.MaxNames <= 0 {
		opts.MaxNames = DefaultMaxNames
	}
	if opts.Generalize == "" {
		opts.Generalize = GeneralizeAuto
	}
	g := &Generator{schema: s, opts: opts, allowed: map[userPerm]*evidence{},
		forbidden: map[subjectPerm]bool{}, forbiddenReqs: map[userPerm]*entities.Request{},
		conditionalReqs: map[userPerm]*entities.Request{},
		stats:           Stats{System: map[string]int{}, NotSeen: map[string]int{}}}
	if opts.Existing != nil {
		g.existing = engine.NewEngine(s, opts.Existing, engine.EngineOptions{})
	}
	if opts.RBAC != nil {
		g.rbac = engine.NewEngine(s, opts.RBAC, engine.EngineOptions{})
	}
	return g
}

// Stats are the counts so far.
func (g *Generator) Stats() Stats { return g.stats }

// coverage is what already allows an allowed request.
type coverage int

const (
	notCovered coverage = iota
	// coveredExisting: the existing policies allow it.
	coveredExisting
	// coveredConditionally: the existing policies allow it on conditions.
	coveredConditionally
	// coveredRBAC: Options.RBAC allows it.
	coveredRBAC
)

// classified is what Add learns of one input on any core.
type classified struct {
	notSeen string
	system  string
	covered coverage
	perm    perm
}

// Add folds a batch of inputs in: classified (and decided by the existing
// policies) on every core, then counted in order.
func (g *Generator) Add(batch []Input) {
	out := make([]classified, len(batch))
	parallel.For(len(batch), func(i int) { out[i] = g.classify(&batch[i]) })
	for i := range batch {
		g.fold(&batch[i], &out[i])
	}
}

// classify is why kcedar never sees an input, the system class of its
// user, its permission, and what already allows it.
func (g *Generator) classify(in *Input) classified {
	c := classified{}
	if g.opts.Reach != nil && in.Review != nil {
		if c.notSeen = g.opts.Reach.NotSeen(in.Review); c.notSeen != "" {
			return c
		}
	}
	if !g.opts.IncludeSystem {
		if c.system = SystemClass(in.Request.User); c.system != "" {
			return c
		}
	}
	c.perm = permOf(g.schema, in.Request)
	if in.Allowed {
		c.covered = g.coverageOf(in.Request)
	}
	return c
}

// coverageOf is what already allows the allowed request req: the existing
// policies, unconditionally or on conditions (a conditional decision that
// can allow: it has allow conditions), else the RBAC.
func (g *Generator) coverageOf(req *entities.Request) coverage {
	if g.existing != nil {
		switch d := g.existing.Authorize(context.Background(), req); {
		case d.IsAllowed():
			return coveredExisting
		case d.IsConditional() && len(d.AllowConditions()) > 0:
			return coveredConditionally
		}
	}
	if g.rbac != nil && g.rbac.Authorize(context.Background(), req).IsAllowed() {
		return coveredRBAC
	}
	return notCovered
}

// fold counts one classified input.
func (g *Generator) fold(in *Input, c *classified) {
	g.stats.Requests++
	if in.Allowed {
		g.stats.Allowed++
	} else {
		g.stats.Forbidden++
	}
	switch {
	case c.notSeen != "":
		g.stats.NotSeen[c.notSeen]++
		return
	case c.system != "":
		g.stats.System[c.system]++
		return
	case c.covered != notCovered:
		g.covered(in, c)
		return
	}
	u := in.Request.User
	user := userSubject(u)
	if !in.Allowed {
		up := userPerm{user: u.Name, principal: user.principal, perm: c.perm}
		g.forbidden[subjectPerm{user, c.perm}] = true
		for _, grp := range g.opts.GroupSubjects {
			if containsString(u.Groups, grp) {
				g.forbidden[subjectPerm{subject{isGroup: true, name: grp}, c.perm}] = true
			}
		}
		if g.forbiddenReqs[up] == nil {
			g.forbiddenReqs[up] = in.Request
		}
		return
	}
	up := userPerm{user: u.Name, group: groupSubjectOf(u, g.opts.GroupSubjects), principal: user.principal, perm: c.perm}
	ev := g.allowed[up]
	if ev == nil {
		ev = &evidence{}
		g.allowed[up] = ev
	}
	ev.add(1, in.Time, in.Time)
}

// covered counts an allowed request something already allows, and keeps
// a request of each conditionally allowed permission to check the
// policies against.
func (g *Generator) covered(in *Input, c *classified) {
	switch c.covered {
	case coveredExisting:
		g.stats.AlreadyAllowed++
	case coveredRBAC:
		g.stats.AllowedByRBAC++
	case coveredConditionally:
		g.stats.ConditionallyAllowed++
		u := in.Request.User
		up := userPerm{user: u.Name, principal: userSubject(u).principal, perm: c.perm}
		if g.conditionalReqs[up] == nil {
			g.conditionalReqs[up] = in.Request
		}
	}
}

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
