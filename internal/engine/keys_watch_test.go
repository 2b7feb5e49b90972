package engine

import (
	"encoding/base64"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The key file is reloaded on file system events (no poll within the test):
// an atomic rename loads, an invalid file keeps the previous keys.
func TestKeyringWatchFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "keys")
	line := func(id string, b byte) string {
		return id + " " + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune(b)), 32))) + "\n"
	}
	if err := os.WriteFile(file, []byte(line("k1", 'a')), 0o600); err != nil {
		t.Fatal(err)
	}
	kr, err := LoadKeyFile(file)
	if err != nil {
		t.Fatal(err)
	}
	go kr.WatchFile(t.Context(), file, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)))
	time.Sleep(100 * time.Millisecond) // let the watch start
	replace := func(content string) {
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(id string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); kr.signing().ID != id; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("signing key %s, want %s", kr.signing().ID, id)
			}
		}
	}
	replace(line("k2", 'b') + line("k1", 'a'))
	wait("k2")
	replace("k3 short\n")
	time.Sleep(200 * time.Millisecond)
	if kr.signing().ID != "k2" {
		t.Fatal("an invalid key file replaced the keys")
	}
	replace(line("k3", 'c'))
	wait("k3")
}
