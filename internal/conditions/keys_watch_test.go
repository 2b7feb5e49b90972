package conditions

import (
	"context"
	"encoding/base64"
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
	logged := make(chan string, 100)
	kr.WatchFile(t.Context(), file, time.Hour, slog.New(messages(logged)))
	replace := func(content string) {
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	// A reload of other content logs, after the keys moved (or not): wait
	// for it. An invalid file is reported again on every event until fixed.
	const invalid = "conditions key file is invalid; keeping the previous keys"
	reloaded := func(want string) {
		t.Helper()
		for {
			select {
			case msg := <-logged:
				if msg == want {
					return
				}
				if msg != invalid {
					t.Fatalf("logged %q, want %q", msg, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no reload (%q) after the file changed", want)
			}
		}
	}
	replace(line("k2", 'b') + line("k1", 'a'))
	reloaded("conditions keys reloaded")
	if id := kr.signing().ID; id != "k2" {
		t.Fatalf("signing key %s, want k2", id)
	}
	replace("k3 short\n")
	reloaded(invalid)
	if kr.signing().ID != "k2" {
		t.Fatal("an invalid key file replaced the keys")
	}
	replace(line("k3", 'c'))
	reloaded("conditions keys reloaded")
	if id := kr.signing().ID; id != "k3" {
		t.Fatalf("signing key %s, want k3", id)
	}
}

// messages is a slog handler sending the message of each record at Info or
// above to its channel.
type messages chan<- string

func (m messages) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (m messages) Handle(_ context.Context, r slog.Record) error {
	m <- r.Message
	return nil
}
func (m messages) WithAttrs([]slog.Attr) slog.Handler { return m }
func (m messages) WithGroup(string) slog.Handler      { return m }
