package generate

import (
	"context"
	"time"

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
	// allows are not generated.
	Existing *cedarlang.PolicySet
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

// Input is one logged request: as the authorizer saw it, and the logged
// decision.
type Input struct {
	Request *entities.Request
	Allowed bool
	Time    time.Time
}

// Generator folds logged requests into permissions; Policies writes them.
type Generator struct {
	schema   *schemagen.Schema
	opts     Options
	existing *engine.Engine
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
}

// Stats count what a Generator read.
type Stats struct {
	Requests  int `json:"requests"`
	Allowed   int `json:"allowed"`
	Forbidden int `json:"forbidden"`
	// AlreadyAllowed are allowed requests the existing policies allow.
	AlreadyAllowed int `json:"alreadyAllowed"`
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
	g := &Generator{schema: s, opts: opts, allowed: map[userPerm]*evidence{},
		forbidden: map[subjectPerm]bool{}, forbiddenReqs: map[userPerm]*entities.Request{},
		stats: Stats{System: map[string]int{}}}
	if opts.Existing != nil {
		g.existing = engine.NewEngine(s, opts.Existing, engine.NewCodec(engine.RandomKeyring()), engine.EngineOptions{})
	}
	return g
}

// Stats are the counts so far.
func (g *Generator) Stats() Stats { return g.stats }

// classified is what Add learns of one input on any core.
type classified struct {
	system         string
	alreadyAllowed bool
	perm           perm
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

// classify is the system class of an input's user, its permission, and
// whether the existing policies allow it.
func (g *Generator) classify(in *Input) classified {
	c := classified{}
	if !g.opts.IncludeSystem {
		if c.system = SystemClass(in.Request.User); c.system != "" {
			return c
		}
	}
	c.perm = permOf(g.schema, in.Request)
	if in.Allowed && g.existing != nil {
		c.alreadyAllowed = g.existing.Authorize(context.Background(), in.Request).IsAllowed()
	}
	return c
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
	case c.system != "":
		g.stats.System[c.system]++
		return
	case c.alreadyAllowed:
		g.stats.AlreadyAllowed++
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

func containsString(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
