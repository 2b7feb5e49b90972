package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
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
