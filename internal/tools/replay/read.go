package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// line is one line of an input, copied out of the reader's buffer.
type line struct {
	no       int // 1-based line number in its input
	data     []byte
	oversize bool // longer than the limit: data is empty
}

// lineReader reads the lines of one input, plain or gzipped (told by the
// gzip magic bytes), never holding more than one line of MaxLineBytes.
type lineReader struct {
	br      *bufio.Reader
	gz      bool
	no      int
	limit   int
	counted *countingReader // bytes consumed of the input
	// pending are the events of an EventList line not returned yet.
	pending []line
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// newLineReader opens r, unzipping it if it starts with gzip's magic bytes.
func newLineReader(r io.Reader, limit int) (*lineReader, error) {
	counted := &countingReader{r: r}
	br := bufio.NewReaderSize(counted, limit)
	lr := &lineReader{br: br, limit: limit, counted: counted}
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		lr.gz = true
		lr.br = bufio.NewReaderSize(zr, limit)
	}
	return lr, nil
}

// next returns the next line, or io.EOF after the last one. Another error
// (a truncated gzip stream, a failing read) ends the input: the partial
// line it interrupted is dropped.
func (lr *lineReader) next() (line, error) {
	if len(lr.pending) > 0 {
		l := lr.pending[0]
		lr.pending = lr.pending[1:]
		return l, nil
	}
	l, err := lr.nextLine()
	if err != nil || l.oversize {
		return l, err
	}
	if items, ok := eventListItems(l.data); ok {
		if len(items) == 0 {
			return line{no: l.no}, nil // an empty list: a blank line
		}
		for _, item := range items[1:] {
			lr.pending = append(lr.pending, line{no: l.no, data: item})
		}
		return line{no: l.no, data: items[0]}, nil
	}
	return l, nil
}

// eventListItems splits an audit EventList (what kube-apiserver's webhook
// backend sends, and what some collectors store a line of) into its
// events, each given the list's apiVersion and kind Event when it has
// none, as a line of a log file would have them. ok is false for anything
// else.
func eventListItems(data []byte) (items [][]byte, ok bool) {
	if !bytes.Contains(data, []byte(`"EventList"`)) {
		return nil, false
	}
	var list struct {
		Kind       string            `json:"kind"`
		APIVersion string            `json:"apiVersion"`
		Items      []json.RawMessage `json:"items"`
	}
	if json.Unmarshal(data, &list) != nil || list.Kind != "EventList" || !bytes.HasPrefix([]byte(list.APIVersion), []byte("audit.k8s.io/")) {
		return nil, false
	}
	for _, item := range list.Items {
		items = append(items, withEventType(item, list.APIVersion))
	}
	return items, true
}

// withEventType is an item of an EventList as a whole Event: list items
// carry no kind or apiVersion, so the list's are put first (an item's
// own, later in the object, win when it has them).
func withEventType(item []byte, apiVersion string) []byte {
	item = bytes.TrimSpace(item)
	if len(item) < 2 || item[0] != '{' {
		return bytes.Clone(item)
	}
	head, _ := json.Marshal(map[string]string{"apiVersion": apiVersion, "kind": "Event"})
	out := append(head[:len(head)-1:len(head)-1], ',')
	if bytes.Equal(bytes.TrimSpace(item[1:]), []byte("}")) {
		out = out[:len(out)-1]
	}
	return append(out, item[1:]...)
}

// nextLine reads the next line of the input.
func (lr *lineReader) nextLine() (line, error) {
	var oversize bool
	for {
		data, err := lr.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			oversize = true // skip to the end of the line
			continue
		}
		// A last line without a newline is a line all the same.
		if err != nil && (err != io.EOF || (len(data) == 0 && !oversize)) {
			return line{}, err
		}
		lr.no++
		if oversize {
			return line{no: lr.no, oversize: true}, nil
		}
		return line{no: lr.no, data: bytes.Clone(bytes.TrimSpace(data))}, nil
	}
}
