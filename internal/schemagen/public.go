package schemagen

// The public package schemagen wraps a *Schema in its Schema type, which
// exports nothing of it. ToPublic and FromPublic convert between the two;
// the public package sets them in its init, so that the other public
// packages (cedar) and the CLI reach the wrapped schema, and wrap one they
// generated, without an exported accessor on the public type. This is the
// one way across: nothing else in the public API names an internal type.
var (
	// ToPublic wraps s as a *schemagen.Schema of the public package.
	ToPublic func(s *Schema) any
	// FromPublic is the schema a *schemagen.Schema of the public package
	// wraps; nil for nil or another type.
	FromPublic func(public any) *Schema
)
