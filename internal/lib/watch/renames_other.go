//go:build !linux

package watch

// Renames witnesses which files arrived by a rename; without inotify it
// witnesses nothing (NewRenames returns nil, and a nil *Renames answers
// false), and files renamed within one tick of the clock wait the settle
// window.
type Renames struct{}

// NewRenames returns nil: this system has no witness.
func NewRenames() *Renames { return nil }

// Close does nothing.
func (r *Renames) Close() {}

// Watch does nothing.
func (r *Renames) Watch(string) {}

// Mark returns 0.
func (r *Renames) Mark() uint64 { return 0 }

// Arrived is false: nothing is witnessed.
func (r *Renames) Arrived(string, uint64) bool { return false }
