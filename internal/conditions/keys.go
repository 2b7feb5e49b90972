package conditions

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kcedar/kcedar/internal/lib/watch"
)

// Keyring holds the keys that protect conditions: the first signs, every key
// verifies. Replicas share the key file; to rotate, put a new key first, keep
// the old one below it for longer than the API server may hold conditions
// (its authorization cache TTL plus the longest request), then drop it.
type Keyring struct {
	keys atomic.Pointer[[]Key]
}

// Key is one named HMAC key.
type Key struct {
	ID     string
	Secret []byte
}

// MinKeyBytes is the shortest key accepted.
const MinKeyBytes = 32

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,16}$`)

// NewKeyring returns a keyring of keys; the first signs.
func NewKeyring(keys ...Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("no keys")
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if !keyIDPattern.MatchString(k.ID) {
			return nil, fmt.Errorf("key id %q: use 1-16 letters, digits, '-' or '_'", k.ID)
		}
		if len(k.Secret) < MinKeyBytes {
			return nil, fmt.Errorf("key %q: %d bytes, need at least %d", k.ID, len(k.Secret), MinKeyBytes)
		}
		if seen[k.ID] {
			return nil, fmt.Errorf("key id %q appears twice", k.ID)
		}
		seen[k.ID] = true
	}
	kr := &Keyring{}
	kr.keys.Store(&keys)
	return kr, nil
}

// RandomKeyring makes a keyring with one random key: conditions then verify
// only on this process, until it restarts.
func RandomKeyring() *Keyring {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		panic(err)
	}
	kr, _ := NewKeyring(Key{ID: "ephemeral", Secret: secret})
	return kr
}

// ParseKeyFile reads a key file: one key a line, "<id> <base64 secret>";
// blank lines and lines starting with # are ignored. The first key signs.
// Generate a line with: echo "k1 $(head -c 32 /dev/urandom | base64 -w0)"
func ParseKeyFile(data []byte) ([]Key, error) {
	var keys []Key
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"<id> <base64 secret>\"", line)
		}
		secret, err := base64.StdEncoding.DecodeString(fields[1])
		if err != nil {
			return nil, fmt.Errorf("line %d: secret is not base64: %v", line, err)
		}
		keys = append(keys, Key{ID: fields[0], Secret: secret})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("no keys in the file")
	}
	return keys, nil
}

// LoadKeyFile reads a key file into a new keyring.
func LoadKeyFile(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := ParseKeyFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return NewKeyring(keys...)
}

// Replace swaps in new keys (for a reloaded key file).
func (k *Keyring) Replace(keys []Key) error {
	nk, err := NewKeyring(keys...)
	if err != nil {
		return err
	}
	k.keys.Store(nk.keys.Load())
	return nil
}

func (k *Keyring) signing() Key { return (*k.keys.Load())[0] }

// cacheID identifies a key in caches of signed conditions: its id and its
// secret, so a key file that gives an id a new secret is not answered with
// conditions signed with the old one.
func (k Key) cacheID() string { return k.ID + "\x00" + string(k.Secret) }

func (k *Keyring) lookup(id string) (Key, bool) {
	for _, key := range *k.keys.Load() {
		if key.ID == id {
			return key, true
		}
	}
	return Key{}, false
}

// WatchFile reloads the keys from path whenever the file changes (file
// system events on it or its directory, e.g. a Secret volume's "..data" swap;
// internal/lib/watch), checking every interval as the fallback, until ctx ends.
// An invalid file keeps the previous keys. It returns once the watches are
// registered (a change made after it returns is seen) and reloads on a
// goroutine of its own.
func (k *Keyring) WatchFile(ctx context.Context, path string, interval time.Duration, logger *slog.Logger) {
	last, _ := os.ReadFile(path)
	watch.Start(ctx, []string{path}, interval, logger, func() {
		data, err := os.ReadFile(path)
		if err != nil || bytes.Equal(data, last) {
			return
		}
		parsed, err := ParseKeyFile(data)
		if err == nil {
			err = k.Replace(parsed)
		}
		if err != nil {
			logger.Error("conditions key file is invalid; keeping the previous keys", "file", path, "err", err)
			return
		}
		last = data
		logger.Info("conditions keys reloaded", "file", path, "keys", len(parsed))
	})
}
