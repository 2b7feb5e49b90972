package schemagen

import "testing"

// BenchmarkGenerateDefault measures what `kcedar schema export` does with the
// embedded default: read the documents, parse the OpenAPI, generate.
func BenchmarkGenerateDefault(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		docs, err := Default()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Generate(docs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExportDefault adds printing the Cedar text.
func BenchmarkExportDefault(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		docs, err := Default()
		if err != nil {
			b.Fatal(err)
		}
		s, err := Generate(docs)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.MarshalCedar(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseSchema measures rebuilding the model from an exported schema
// (--schema FILE).
func BenchmarkParseSchema(b *testing.B) {
	text, err := defaultSchema(b).MarshalCedar()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := ParseSchema(text); err != nil {
			b.Fatal(err)
		}
	}
}
