package cedar

// Internals for the external tests (package cedar_test), which may import
// packages that import cedar (internal/testgen/zoo).
var (
	CheckNestingForTest  = checkNesting
	ParseErrorForTest    = parseError
	ChunkPoliciesForTest = chunkPolicies
)
