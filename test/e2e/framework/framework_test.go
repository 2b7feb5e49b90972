package framework

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// These tests need no cluster; they run with `go test ./...`.

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 5, "a\nb\nc"},
		{"a\nb\nc", 3, "a\nb\nc"},
		{"a\nb\nc", 0, ""},
	} {
		if got := tail(tc.in, tc.n); got != tc.want {
			t.Errorf("tail(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestWriteTokenFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.csv")
	err := writeTokenFile(p, []Token{
		{Token: "t1", User: "alice", UID: "u1", Groups: []string{"g1", "g2"}},
		{Token: "t2", User: "bob"},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	r := csv.NewReader(strings.NewReader(string(b)))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"t1", "alice", "u1", "g1,g2"}, {"t2", "bob", "bob"}}
	if !reflect.DeepEqual(recs, want) {
		t.Errorf("token file %q parses as %q, want %q", b, recs, want)
	}
	if err := writeTokenFile(p, []Token{{User: "x"}}); err == nil {
		t.Error("empty token accepted")
	}
}

func TestBinariesMissing(t *testing.T) {
	t.Setenv("ETCD_BIN", "")
	t.Setenv("KUBE_APISERVER_BIN", "")
	t.Setenv("KUBE_E2E_CACHE", t.TempDir())
	_, _, err := Binaries()
	if err == nil || !strings.Contains(err.Error(), "make e2e") || !strings.Contains(err.Error(), "hack/kube-binaries.sh") {
		t.Fatalf("Binaries() with an empty cache: %v", err)
	}
	if _, _, err := StartCluster(Options{}); err == nil {
		t.Fatal("StartCluster without binaries succeeded")
	}
}

func TestFreePortUnique(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
