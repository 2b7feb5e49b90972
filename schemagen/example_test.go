package schemagen_test

import (
	"bytes"
	"fmt"
	"log"

	"github.com/kcedar/kcedar/schemagen"
)

// The built-in schema of stock Kubernetes, in Cedar's schema language: pods
// are entity types of the core namespace, and every verb is an action.
func Example() {
	schema, err := schemagen.Default()
	if err != nil {
		log.Fatal(err)
	}
	text, err := schema.MarshalCedar()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(bytes.Contains(text, []byte("namespace core")))
	fmt.Println(bytes.Contains(text, []byte("action get in \"*\"")))
	// Output:
	// true
	// true
}

// A schema round-trips through `kcedar schema export`'s JSON form.
func ExampleParse() {
	schema, err := schemagen.Default()
	if err != nil {
		log.Fatal(err)
	}
	exported, err := schema.MarshalJSON()
	if err != nil {
		log.Fatal(err)
	}
	again, err := schemagen.Parse(exported)
	if err != nil {
		log.Fatal(err)
	}
	reexported, _ := again.MarshalJSON()
	fmt.Println(bytes.Equal(exported, reexported))
	// Output: true
}
