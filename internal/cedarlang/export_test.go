package cedarlang

// Internals for the external tests (package cedar_test), which may import
// packages that import cedar (internal/testing/testgen/zoo).
var (
	CheckNestingForTest = checkNesting
	ParseErrorForTest   = parseError
)
