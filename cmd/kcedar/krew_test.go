package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// krewManifest is the fields of krew's Plugin (v1alpha2) the test reads.
type krewManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Platforms        []struct {
			Selector *metav1.LabelSelector `json:"selector"`
			URI      string                `json:"uri"`
			Sha256   string                `json:"sha256"`
			Bin      string                `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// addURIAndSha is krew-release-bot's template function, filled by the test
// as the bot fills it (with a made-up checksum).
var addURIAndSha = regexp.MustCompile(`\{\{\s*addURIAndSha "([^"]+)" \.TagName\s*\}\}`)

// renderKrewManifest fills the template plugins/krew/cedar.yaml for a tag.
func renderKrewManifest(t *testing.T, tag string) krewManifest {
	t.Helper()
	raw, err := os.ReadFile("../../plugins/krew/cedar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := addURIAndSha.ReplaceAllString(string(raw), "uri: $1\n    sha256: "+strings.Repeat("0", 64))
	text = regexp.MustCompile(`\{\{\s*\.TagName\s*\}\}`).ReplaceAllString(text, tag)
	if strings.Contains(text, "{{") {
		t.Fatalf("the manifest has template actions krew-release-bot does not fill:\n%s", text)
	}
	var m krewManifest
	if err := yaml.UnmarshalStrict([]byte(text), &m); err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return m
}

// The krew manifest is valid krew: its required fields are there, it is
// one platform per release platform of the Makefile with a valid selector,
// its archives are those `make release` writes for the tag (VERSION), and
// each holds the bin it names.
func TestKrewManifest(t *testing.T) {
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	const tag = "v1.2.3"
	m := renderKrewManifest(t, tag)
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "cedar" {
		t.Errorf("apiVersion %q, kind %q, name %q", m.APIVersion, m.Kind, m.Metadata.Name)
	}
	if m.Spec.Version != tag || m.Spec.ShortDescription == "" || len(m.Spec.ShortDescription) > 50 || m.Spec.Description == "" || !strings.HasPrefix(m.Spec.Homepage, "https://") {
		t.Errorf("version %q (want the tag %q), shortDescription %q (at most 50 characters), homepage %q, description %d bytes", m.Spec.Version, tag, m.Spec.ShortDescription, m.Spec.Homepage, len(m.Spec.Description))
	}
	platforms := regexp.MustCompile(`(?m)^RELEASE_PLATFORMS \?= (.*)$`).FindSubmatch(makefile)
	if platforms == nil {
		t.Fatal("no RELEASE_PLATFORMS in the Makefile")
	}
	want := strings.Fields(string(platforms[1]))
	// The archive `make release` writes, and what it holds.
	archive := regexp.MustCompile(`tar -C \$\$krew -czf \$\(RELEASE_DIR\)/(kubectl-cedar-\$\(VERSION\)-\$\$os-\$\$arch\.tar\.gz) ([^&]+)&&`).FindSubmatch(makefile)
	if archive == nil {
		t.Fatal("the Makefile's release target writes no kubectl-cedar archive")
	}
	contents := strings.Fields(string(archive[2]))
	var got []string
	for _, p := range m.Spec.Platforms {
		sel, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil || p.Selector == nil || len(p.Selector.MatchLabels) != 2 {
			t.Errorf("platform %s: selector %v: %v", p.URI, p.Selector, err)
			continue
		}
		osName, arch := p.Selector.MatchLabels["os"], p.Selector.MatchLabels["arch"]
		got = append(got, osName+"/"+arch)
		name := strings.NewReplacer("$(VERSION)", tag, "$$os", osName, "$$arch", arch).Replace(string(archive[1]))
		if wantURI := "https://github.com/kcedar/kcedar/releases/download/" + tag + "/" + name; p.URI != wantURI {
			t.Errorf("%s/%s: uri %s, want %s (the archive make release writes)", osName, arch, p.URI, wantURI)
		}
		if !sel.Matches(labels.Set{"os": osName, "arch": arch}) || !slices.Contains(contents, p.Bin) || p.Bin != pluginName {
			t.Errorf("%s/%s: bin %q is not %s in the archive (%q), or the selector does not select it", osName, arch, p.Bin, pluginName, contents)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("platforms %q, want the release platforms %q", got, want)
	}
}
