// Package version is kcedar's build identity: the version set at link time
// (-ldflags "-X github.com/kcedar/kcedar/internal/lib/version.Version=v1.2.3"),
// else the module version and VCS revision Go records in the binary.
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is set at link time; empty means "ask the build info".
var Version = ""

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the binary's build identity.
func Get() Info {
	i := Info{Version: Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "" && bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	return i
}
