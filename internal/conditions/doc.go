// Package conditions carries the engine's conditional decisions to the API
// server and back: it encodes residuals as conditions signed with a keyring
// (Codec, Keyring), binds each to the request it was issued for (Binding),
// and evaluates conditions against admission data (Evaluator), in the
// callback and in kcedar's admission webhook (Engine.Admit). An Engine pairs
// an engine.Engine with its codec and evaluator; Serving does so for the
// policy set serving now.
package conditions
