package conditions

import (
	"context"

	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/entities"
	"github.com/kcedar/kcedar/internal/wire"
)

// Engine is the engine of one policy set with its conditions: it encodes the
// engine's conditional decisions as signed conditions (Codec), evaluates
// conditions against admission data (Evaluator), and answers admission
// requests and offline reports with both. The engine's own methods (Authorize,
// WhoCan, WhatCan...) are promoted. Build one per engine (New): its
// evaluator indexes the schema once. Safe for concurrent use.
type Engine struct {
	*engine.Engine
	codec *Codec
	eval  *Evaluator
}

var _ Interface = (*Engine)(nil)

// New returns e with its conditions, signed and verified with codec. The
// codec may be shared by the engines of successive generations (its keys
// rotate on their own).
func New(e *engine.Engine, codec *Codec) *Engine {
	return &Engine{Engine: e, codec: codec, eval: &Evaluator{Schema: e.Schema(), Codec: codec, Namespaces: e.Namespaces()}}
}

// Codec signs and verifies the engine's conditions.
func (e *Engine) Codec() *Codec { return e.codec }

// Evaluator evaluates conditions against admission data with the engine's
// schema.
func (e *Engine) Evaluator() *Evaluator { return e.eval }

// EvaluateConditions implements ConditionsEvaluator.
func (e *Engine) EvaluateConditions(_ context.Context, d *wire.ConditionsAwareDecision, data *AdmissionData) engine.Decision {
	return e.eval.EvaluateDecision(d, data)
}

// Explain explains req's decision (engine.Engine.Explain), rendered as
// Report renders it.
func (e *Engine) Explain(ctx context.Context, req *entities.Request) (engine.Explanation, error) {
	return e.Engine.Explain(req, func() engine.Report { return e.Report(ctx, req, nil) })
}
