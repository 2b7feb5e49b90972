// Package offline answers requests without a server, exactly as kcedar serve
// does (the same authorizer, condition encoding and callback evaluation), and
// runs YAML files of expected decisions: the engine of kcedar authorize and
// kcedar test.
package offline
