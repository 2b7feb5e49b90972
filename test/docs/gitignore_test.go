package docs

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// writtenBy finds what a shell command line writes, relative to where it
// runs: openssl's -keyout, -out and -CAcreateserial (the CA's .srl), a
// redirection, --output-dir, mkdir, kubectl config's --kubeconfig=.
var writtenBy = []*regexp.Regexp{
	regexp.MustCompile(`-keyout (\S+)`),
	regexp.MustCompile(`-out (\S+)`),
	regexp.MustCompile(`-CAkey (\S+)\.key -CAcreateserial`),
	regexp.MustCompile(`> (\S+)`),
	regexp.MustCompile(`--output-dir (\S+)`),
	regexp.MustCompile(`mkdir -p (\S+)`),
	regexp.MustCompile(`kubectl config set-\S+ .*--kubeconfig=(\S+)`),
}

// TestGitIgnoresWhatDeployWrites checks that every file and directory
// docs/deploy.md's commands write in the checkout (keys, certificates,
// condition keys, overlays, the API server's files) is ignored by the
// checkout's .gitignore, so none can be committed by a `git add .`.
func TestGitIgnoresWhatDeployWrites(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("SKIPPED: no git to ask what .gitignore ignores")
	}
	fences, _ := parseMarkdown(readDoc(t, filepath.Join(root, "docs", "deploy.md")))
	var written []string
	for _, f := range fences {
		if f.lang != "sh" {
			continue
		}
		for _, line := range f.body {
			for _, re := range writtenBy {
				for _, m := range re.FindAllStringSubmatch(line, -1) {
					p := m[1]
					switch {
					case strings.HasSuffix(re.String(), `-CAcreateserial`):
						p += ".srl"
					case strings.HasPrefix(re.String(), "--output-dir"), strings.HasPrefix(re.String(), "mkdir"):
						p += "/" // a directory: .gitignore's dir/ matches what is in it
					}
					if !filepath.IsAbs(p) && !strings.HasPrefix(p, "$") && !slices.Contains(written, p) {
						written = append(written, p)
					}
				}
			}
		}
	}
	for _, want := range []string{"serving.key", "client-ca.srl", "condition-keys", "kcedar-overlay/", "kcedar-apiserver/", "kcedar.kubeconfig"} {
		if !slices.Contains(written, want) {
			t.Fatalf("found %v written by docs/deploy.md, without %s: the scan is broken", written, want)
		}
	}
	for _, p := range written {
		path := p
		if strings.HasSuffix(p, "/") {
			path += "kustomization.yaml"
		}
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", path)
		cmd.Dir = root
		if err := cmd.Run(); err != nil {
			t.Errorf("docs/deploy.md writes %s in the checkout, which .gitignore does not ignore (git check-ignore: %v)", p, err)
		}
	}
	t.Logf("ignored: %v", written)
}
