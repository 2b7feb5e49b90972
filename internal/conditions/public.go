package conditions

// The public package residual wraps a *Keyring in its Keyring type, which
// exports nothing of it. KeyringFromPublic is the keyring a
// *residual.Keyring wraps (nil for nil or another type); package residual
// sets it in its init, so that package cedar signs with the keys an
// embedder gave it. internal/schemagen's public.go says why.
var KeyringFromPublic func(public any) *Keyring
