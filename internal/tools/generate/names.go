package generate

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/kcedar/kcedar/internal/entities"
)

// Generalize is how names that carry a generated or per-user part are
// written.
type Generalize string

// The Generalize modes.
const (
	// GeneralizeAuto writes such names as like patterns, within the
	// namespace of their grant: a generated-name suffix (build-x7k2p:
	// build-*), a Deployment's pod (web-5d8f7c9b6-abcde: web-*-*), a
	// pod-template hash (web-5d8f7c9b6: web-*), and in a group's grant the
	// member's own username (alice-workspace: *-workspace).
	GeneralizeAuto Generalize = "auto"
	// GeneralizeNone writes every name as it was requested.
	GeneralizeNone Generalize = "none"
)

// Why a name was generalized, as the policy's comment says.
const (
	whyGeneratedSuffix = "generated-name suffix"
	whyPodOfTemplate   = "pod-template hash and generated-name suffix"
	whyTemplateHash    = "pod-template hash"
	whyUsername        = "the member's username"
)

// generatedSuffixLen is the length of the random suffix kube-apiserver
// appends to a generateName (k8s.io/apiserver/pkg/storage/names).
const generatedSuffixLen = validation.DNS1123LabelMaxLength - names.MaxGeneratedNameLength

var (
	// generatedAlphabet are the characters of a generated-name suffix:
	// k8s.io/apimachinery's rand alphabet, which SafeEncodeString maps
	// every byte onto.
	generatedAlphabet = runeSet(rand.SafeEncodeString(string(allBytes())))
	// templateHashAlphabet are the characters of a pod-template hash (and a
	// ControllerRevision's): a uint32's decimal digits, SafeEncodeString'd.
	templateHashAlphabet = runeSet(rand.SafeEncodeString("0123456789"))
	// digits are the alphabet's digits: a generated part has one (else
	// words like "https" would read as one; a grant whose other names
	// made the pattern still covers it, see absorbed).
	digits = runeSet("0123456789")
)

// The lengths of a pod-template hash recognized: a uint32 has at most ten
// decimal digits, and all but 1 in 40,000 have six or more.
const (
	minTemplateHashLen = 6
	maxTemplateHashLen = 10
)

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

func runeSet(s string) map[rune]bool {
	set := map[rune]bool{}
	for _, r := range s {
		set[r] = true
	}
	return set
}

// namePattern is a generalized name: its literals in order, any text
// between two (a Cedar like pattern).
type namePattern struct {
	literals []string
	why      string
}

// text is the pattern as Cedar writes it. Generalized names are DNS
// subdomains: no literal holds a '*' to escape.
func (p namePattern) text() string { return strings.Join(p.literals, "*") }

// matches reports whether the pattern matches s, as Cedar's like does.
func (p namePattern) matches(s string) bool {
	lits := p.literals
	if !strings.HasPrefix(s, lits[0]) {
		return false
	}
	s = s[len(lits[0]):]
	if len(lits) == 1 {
		return s == ""
	}
	last := lits[len(lits)-1]
	for _, lit := range lits[1 : len(lits)-1] {
		i := strings.Index(s, lit)
		if i < 0 {
			return false
		}
		s = s[i+len(lit):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// generalizeName is the pattern a name requested by user is written as,
// if it carries a generated part, or, in a group's grant (group), the
// user's name. Only names that are DNS subdomains, as Kubernetes names
// its objects, are generalized.
func generalizeName(name, user string, group bool) (namePattern, bool) {
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return namePattern{}, false
	}
	if base, ok := cutPodOfTemplate(name); ok {
		return namePattern{literals: []string{base + "-", "-", ""}, why: whyPodOfTemplate}, true
	}
	if base, ok := cutGeneratedSuffix(name); ok {
		return namePattern{literals: []string{base, ""}, why: whyGeneratedSuffix}, true
	}
	if base, ok := cutTemplateHash(name); ok {
		return namePattern{literals: []string{base + "-", ""}, why: whyTemplateHash}, true
	}
	if group {
		if before, after, ok := cutUsername(name, user); ok {
			return namePattern{literals: []string{before, after}, why: whyUsername}, true
		}
	}
	return namePattern{}, false
}

// generated reports whether part is n characters of alphabet with a digit.
func generated(part string, alphabet map[rune]bool, minLen, maxLen int) bool {
	if len(part) < minLen || len(part) > maxLen {
		return false
	}
	digit := false
	for _, r := range part {
		if !alphabet[r] {
			return false
		}
		digit = digit || digits[r]
	}
	return digit
}

// cutGeneratedSuffix is the generateName of base-xxxxx: base (ending in a
// dash, with something before it) and a generated suffix.
func cutGeneratedSuffix(name string) (string, bool) {
	if len(name) < generatedSuffixLen+2 {
		return "", false
	}
	base, suffix := name[:len(name)-generatedSuffixLen], name[len(name)-generatedSuffixLen:]
	if !strings.HasSuffix(base, "-") || len(base) < 2 || !generated(suffix, generatedAlphabet, generatedSuffixLen, generatedSuffixLen) {
		return "", false
	}
	return base, true
}

// cutTemplateHash is the base of base-<pod-template hash> (a ReplicaSet's
// or a ControllerRevision's name).
func cutTemplateHash(name string) (string, bool) {
	i := strings.LastIndexByte(name, '-')
	if i < 1 || !generated(name[i+1:], templateHashAlphabet, minTemplateHashLen, maxTemplateHashLen) {
		return "", false
	}
	return name[:i], true
}

// cutPodOfTemplate is the base of base-<pod-template hash>-<suffix>, a
// Deployment's pod.
func cutPodOfTemplate(name string) (string, bool) {
	if len(name) < generatedSuffixLen+2 || name[len(name)-generatedSuffixLen-1] != '-' {
		return "", false
	}
	suffix := name[len(name)-generatedSuffixLen:]
	for _, r := range suffix {
		if !generatedAlphabet[r] {
			return "", false
		}
	}
	return cutTemplateHash(name[:len(name)-generatedSuffixLen-1])
}

// minUsernameLen is the shortest username part recognized in a name.
const minUsernameLen = 3

// cutUsername splits name around the first whole run of its dash- or
// dot-separated segments that is the user's name (lower-cased; a
// ServiceAccount's name, an e-mail address's local part); the name must
// hold more than that.
func cutUsername(name, user string) (before, after string, ok bool) {
	token := strings.ToLower(user)
	if _, sa, isSA := entities.ServiceAccountName(user); isSA {
		token = sa
	} else if local, _, isMail := strings.Cut(token, "@"); isMail {
		token = local
	}
	if len(token) < minUsernameLen || len(name) <= len(token) {
		return "", "", false
	}
	sep := func(i int) bool { return name[i] == '-' || name[i] == '.' }
	for i := strings.Index(name, token); i >= 0; {
		end := i + len(token)
		if (i == 0 || sep(i-1)) && (end == len(name) || sep(end)) {
			return name[:i], name[end:], true
		}
		next := strings.Index(name[i+1:], token)
		if next < 0 {
			break
		}
		i += 1 + next
	}
	return "", "", false
}

// rulePattern is a pattern of a name rule, with one name it stands for.
type rulePattern struct {
	namePattern
	example string
}

// absorbed are the names no pattern matches (the others are written by
// their pattern), sorted.
func absorbed(names []string, patterns []rulePattern) []string {
	return slices.DeleteFunc(names, func(n string) bool {
		return slices.ContainsFunc(patterns, func(p rulePattern) bool { return p.matches(n) })
	})
}
