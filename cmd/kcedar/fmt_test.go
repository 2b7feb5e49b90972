package main

import (
	"os"
	"strings"
	"testing"
)

func TestFmtCommand(t *testing.T) {
	dir := t.TempDir()
	messy := "@id(\"a\") permit(principal,action,resource) // keep\nwhen{true};\n"
	tidy := "@id(\"a\")\npermit (principal, action, resource) // keep\nwhen { true };\n"
	p := writeFile(t, dir, "a.cedar", messy)
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "b.cedar", tidy)

	if out, code := run(t, newFmtCmd(), p); code != 0 || out != tidy {
		t.Errorf("stdout: %d %q", code, out)
	}
	out, code := run(t, newFmtCmd(), "--check", dir)
	if code != 1 || !strings.Contains(out, "a.cedar") || strings.Contains(out, "b.cedar") {
		t.Errorf("--check: %d %q", code, out)
	}
	if out, code := run(t, newFmtCmd(), "-d", p); code != 0 || !strings.Contains(out, "+when { true };") || !strings.Contains(out, "@@ -1,2 +1,3 @@") {
		t.Errorf("-d: %d %q", code, out)
	}
	if out, code := run(t, newFmtCmd(), "-w", dir); code != 0 {
		t.Fatalf("-w: %d %q", code, out)
	}
	got, _ := os.ReadFile(p)
	info, _ := os.Stat(p)
	if string(got) != tidy || info.Mode().Perm() != 0o600 {
		t.Errorf("-w wrote %q with mode %v", got, info.Mode())
	}
	if out, code := run(t, newFmtCmd(), "--check", dir); code != 0 {
		t.Errorf("--check after -w: %d %q", code, out)
	}
}

func TestFmtCommandErrors(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.cedar", "permit(principal, action, resource)\nwhen { 1 + };\n")
	if out, code := run(t, newFmtCmd(), bad); code != 1 || !strings.Contains(out, "bad.cedar:2:") {
		t.Errorf("parse error: %d %q", code, out)
	}
	noID := writeFile(t, dir, "noid.cedar", "permit(principal,action,resource);\n\n\npermit(principal,action,resource);\n")
	if out, code := run(t, newFmtCmd(), noID); code != 0 || !strings.Contains(out, "noid.cedar:4: policy without @id") {
		t.Errorf("no @id: %d %q", code, out)
	}
	for _, args := range [][]string{{}, {"-w", "--check", dir}, {"-w", "-"}} {
		if out, code := run(t, newFmtCmd(), args...); code != 2 {
			t.Errorf("%v: %d %q", args, code, out)
		}
	}
	cmd := newFmtCmd()
	cmd.SetIn(strings.NewReader("forbid(principal,action,resource);"))
	if out, code := run(t, cmd, "-"); code != 0 || out != "forbid (principal, action, resource);\n" {
		t.Errorf("stdin: %d %q", code, out)
	}
}
