package safetext

import (
	"io"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// NewJSONWriter returns a writer that passes JSON text (documents or JSON
// lines) on to w, with every character at or above DEL that a terminal
// acts on or that does not show (DEL, the C1 controls, the format
// characters such as U+202E, the line and paragraph separators) written
// as a JSON \u escape. encoding/json and log/slog escape the C0 controls
// (ESC, CR, newlines in strings) but pass these as they are, and a log
// read on a terminal is human-readable output too. Outside strings JSON
// is ASCII, so such a character stands inside a string, where the escape
// means the same character: every document reads the same. A byte that is
// not UTF-8 (the encoders never write one) becomes \ufffd. A character
// split across writes is held until it is complete. Safe for concurrent
// use; each Write reaches w in one call.
func NewJSONWriter(w io.Writer) io.Writer { return &jsonWriter{w: w} }

type jsonWriter struct {
	mu    sync.Mutex
	w     io.Writer
	carry []byte // the start of a character the last Write split
}

func (j *jsonWriter) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	data := append(j.carry, p...)
	cut := completeUpTo(data)
	out := make([]byte, 0, len(data)+16)
	for i := 0; i < cut; {
		r, size := utf8.DecodeRune(data[i:cut])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...)
		case r >= 0x7f && hidden(r):
			out = appendJSONEscape(out, r)
		default:
			out = append(out, data[i:i+size]...)
		}
		i += size
	}
	j.carry = append([]byte(nil), data[cut:]...)
	if _, err := j.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// completeUpTo is the length of data's complete characters: all of it
// unless it ends in the first bytes of a multi-byte character.
func completeUpTo(data []byte) int {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				return i
			}
			break
		}
	}
	return len(data)
}

// appendJSONEscape appends r as JSON's \uXXXX (a surrogate pair past the
// Basic Multilingual Plane).
func appendJSONEscape(out []byte, r rune) []byte {
	units := []rune{r}
	if r > 0xffff {
		hi, lo := utf16.EncodeRune(r)
		units = []rune{hi, lo}
	}
	for _, u := range units {
		out = append(out, `\u`...)
		out = append(out, strconv.FormatUint(uint64(u)|0x10000, 16)[1:]...)
	}
	return out
}
