package residual

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/kcedar/kcedar/internal/conditions"
)

// ConditionType is the type of a condition kcedar writes for one policy:
// its language (a Cedar expression over the resource) and its format
// version.
const ConditionType = conditions.ConditionType

// GroupConditionType is the type of a condition kcedar writes for several
// policies of one form: the form (a Cedar expression over the resource and
// `context.v0`, `context.v1`, ...) once, and each policy's id and constants.
// It holds when the form holds for any policy's constants. It shares
// ConditionType's format version.
const GroupConditionType = conditions.GroupConditionType

// Key is one named HMAC key: an ID of 1-16 letters, digits, '-' or '_', and
// a secret of at least 32 bytes.
type Key struct {
	ID     string
	Secret []byte
}

// Keyring holds the keys that sign and verify conditions: the first signs,
// every key verifies. Replicas share one key file. To rotate, put a new key
// first and keep the old one below it for longer than the API server may
// hold conditions (its authorization cache TTL plus the longest request),
// then drop it. A Keyring is safe for concurrent use.
type Keyring struct{ keys *conditions.Keyring }

func init() {
	conditions.KeyringFromPublic = func(public any) *conditions.Keyring {
		if k, ok := public.(*Keyring); ok && k != nil {
			return k.keys
		}
		return nil
	}
}

// errNoKeys is the error of a method of a Keyring no function made.
var errNoKeys = errors.New("residual: a Keyring is made by NewKeyring or LoadKeyFile")

// NewKeyring returns a keyring of keys; the first signs.
func NewKeyring(keys ...Key) (*Keyring, error) {
	k, err := conditions.NewKeyring(internalKeys(keys)...)
	if err != nil {
		return nil, err
	}
	return &Keyring{keys: k}, nil
}

// LoadKeyFile reads a key file: one key a line, "<id> <base64 secret>";
// blank lines and lines starting with # are ignored; the first key signs.
func LoadKeyFile(path string) (*Keyring, error) {
	k, err := conditions.LoadKeyFile(path)
	if err != nil {
		return nil, err
	}
	return &Keyring{keys: k}, nil
}

// Rotate replaces the keys at once (for a reloaded key file); the first
// signs from now on.
func (k *Keyring) Rotate(keys ...Key) error {
	if k == nil || k.keys == nil {
		return errNoKeys
	}
	return k.keys.Replace(internalKeys(keys))
}

// WatchFile rotates to the keys of the key file at path whenever its
// content changes (file system events, and a read every interval), until
// ctx ends; a file that does not parse keeps the keys, and is logged.
func (k *Keyring) WatchFile(ctx context.Context, path string, interval time.Duration, logger *slog.Logger) error {
	if k == nil || k.keys == nil {
		return errNoKeys
	}
	if logger == nil {
		logger = slog.Default()
	}
	k.keys.WatchFile(ctx, path, interval, logger)
	return nil
}

func internalKeys(keys []Key) []conditions.Key {
	out := make([]conditions.Key, len(keys))
	for i, k := range keys {
		out[i] = conditions.Key{ID: k.ID, Secret: k.Secret}
	}
	return out
}
