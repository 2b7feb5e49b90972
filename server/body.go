package server

import (
	"bytes"
	"sync"
)

// maxPooledBody is the largest body buffer kept for reuse: a
// SubjectAccessReview is about a kilobyte, so a buffer grown by a rare large
// body is dropped rather than held.
const maxPooledBody = 64 << 10

// bodyBuffers are the request body buffers of the webhook handlers, reused
// across requests: a body is decoded (and copied out) before its handler
// returns.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// getBodyBuffer returns an empty buffer from the pool.
func getBodyBuffer() *bytes.Buffer { return bodyBuffers.Get().(*bytes.Buffer) }

// putBodyBuffer returns buf to the pool, unless it grew too large.
func putBodyBuffer(buf *bytes.Buffer) {
	if buf.Cap() > maxPooledBody {
		return
	}
	buf.Reset()
	bodyBuffers.Put(buf)
}
