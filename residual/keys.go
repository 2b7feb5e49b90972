package residual

import (
	"github.com/kcedar/kcedar/internal/engine"
	"github.com/kcedar/kcedar/internal/handle"
)

// ConditionType is the type of every condition kcedar writes: its language
// (a Cedar expression over the resource) and its format version.
const ConditionType = engine.ConditionType

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
type Keyring handle.Keyring

// NewKeyring returns a keyring of keys; the first signs.
func NewKeyring(keys ...Key) (*Keyring, error) {
	k, err := engine.NewKeyring(internalKeys(keys)...)
	if err != nil {
		return nil, err
	}
	h := Keyring(handle.NewKeyring(k))
	return &h, nil
}

// LoadKeyFile reads a key file (`kcedar serve --condition-keys`): one key a
// line, "<id> <base64 secret>"; blank lines and lines starting with # are
// ignored; the first key signs.
func LoadKeyFile(path string) (*Keyring, error) {
	k, err := engine.LoadKeyFile(path)
	if err != nil {
		return nil, err
	}
	h := Keyring(handle.NewKeyring(k))
	return &h, nil
}

// Rotate replaces the keys at once (for a reloaded key file); the first
// signs from now on.
func (k *Keyring) Rotate(keys ...Key) error {
	return handle.Keyring(*k).Get().Replace(internalKeys(keys))
}

func internalKeys(keys []Key) []engine.Key {
	out := make([]engine.Key, len(keys))
	for i, k := range keys {
		out[i] = engine.Key{ID: k.ID, Secret: k.Secret}
	}
	return out
}
