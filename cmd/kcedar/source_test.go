package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestSchemaSourceFlags: the source flags parse into a schemaSource, bad
// combinations are usage errors naming the flags, and a kubeconfig that
// cannot be loaded is an error rather than the default schema.
func TestSchemaSourceFlags(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(args ...string) schemaSource {
		t.Helper()
		var s schemaSource
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		s.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return s
	}

	s := parse("--kubeconfig", kubeconfig, "--context", "ctx")
	if !s.IsLive() {
		t.Fatal("--kubeconfig is not live")
	}
	src, err := s.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if src.Config == nil || src.Config.Host != "https://127.0.0.1:1" || src.Config.BearerToken != "t" || src.Config.UserAgent != "kcedar" {
		t.Fatalf("resolved config %+v", src.Config)
	}
	if src, err := parse("--from-dir", dir).resolve(); err != nil || src.FromDir != dir || src.Config != nil {
		t.Fatalf("--from-dir resolved to %+v, %v", src, err)
	}
	if src, err := parse().resolve(); err != nil || src.IsLive() || src.FromDir != "" || src.SchemaFile != "" {
		t.Fatalf("no flags resolved to %+v, %v", src, err)
	}

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"live and dir":     {[]string{"--live", "--from-dir", dir}, "--from-dir"},
		"dir and schema":   {[]string{"--from-dir", dir, "--schema", "x"}, "choose one schema source"},
		"context only":     {[]string{"--context", "x"}, "--context needs a live cluster"},
		"missing kubecfg":  {[]string{"--kubeconfig", filepath.Join(dir, "nope")}, "loading client config"},
		"missing context":  {[]string{"--kubeconfig", kubeconfig, "--context", "nope"}, "loading client config"},
		"kubecfg + schema": {[]string{"--kubeconfig", kubeconfig, "--schema", "x"}, "choose one schema source"},
	} {
		_, err := parse(tc.args...).Load(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Load error %v, want one containing %q", name, err, tc.want)
		}
	}
}
