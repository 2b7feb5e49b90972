package replay

import (
	"bytes"
	"compress/gzip"
	"context"
	"strings"
	"testing"
	"time"
)

// TestReadRecords: one record per decided request, with its logged
// decision and time and the request rebuilt from requestURI (no name on a
// create), from plain and gzipped input; other stages, malformed lines and
// events without a decision are skipped.
func TestReadRecords(t *testing.T) {
	log := strings.Join([]string{
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a","stage":"RequestReceived","requestURI":"/api/v1/namespaces/dev/pods/web","verb":"get","user":{"username":"alice"}}`,
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/dev/pods/web","verb":"get","user":{"username":"alice"},"requestReceivedTimestamp":"2026-05-01T12:00:00.123456Z","annotations":{"authorization.k8s.io/decision":"allow"}}`,
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"b","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/dev/configmaps","verb":"create","user":{"username":"bob"},"objectRef":{"resource":"configmaps","name":"cfg"},"annotations":{"authorization.k8s.io/decision":"forbid"}}`,
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"c","stage":"ResponseComplete","requestURI":"/api/v1/pods","verb":"list","user":{"username":"carol"}}`,
		`not json`,
	}, "\n") + "\n"
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = zw.Write([]byte(log))
	_ = zw.Close()
	for name, in := range map[string][]byte{"plain": []byte(log), "gzip": zipped.Bytes()} {
		var recs []Record
		counts, err := ReadRecords(context.Background(), bytes.NewReader(in), 0, func(batch []Record) error {
			recs = append(recs, batch...)
			return nil
		})
		if err != nil || counts != (RecordCounts{Lines: 5, Requests: 2, Skipped: 3}) || len(recs) != 2 {
			t.Fatalf("%s: %+v %v %d records", name, counts, err, len(recs))
		}
		get, create := recs[0], recs[1]
		if !get.Allowed || get.Request.User.Name != "alice" || get.Request.Name != "web" ||
			!get.Time.Equal(time.Date(2026, 5, 1, 12, 0, 0, 123456000, time.UTC)) {
			t.Errorf("%s: the get: %+v %s", name, get, get.Request)
		}
		if create.Allowed || create.Request.Name != "" || create.Request.Verb != "create" || !create.Time.IsZero() {
			t.Errorf("%s: the create: %+v %s", name, create, create.Request)
		}
	}
	var truncated bytes.Buffer
	truncated.Write(zipped.Bytes()[:zipped.Len()-10])
	if _, err := ReadRecords(context.Background(), &truncated, 0, func([]Record) error { return nil }); err == nil {
		t.Error("a truncated gzip stream is not an error")
	}
}

// TestReadRecordsPairsResponseStarted: a request with a ResponseStarted and
// a ResponseComplete is one record; one with a ResponseStarted alone (a
// watch still open) is one record, at the end of the input.
func TestReadRecordsPairsResponseStarted(t *testing.T) {
	ev := func(id, stage string) string {
		return `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"` + id + `","stage":"` + stage +
			`","requestURI":"/api/v1/namespaces/dev/pods?watch=true","verb":"watch","user":{"username":"alice"},"annotations":{"authorization.k8s.io/decision":"allow"}}`
	}
	log := strings.Join([]string{ev("x", "ResponseStarted"), ev("w", "ResponseStarted"), ev("x", "ResponseComplete")}, "\n") + "\n"
	var ids []string
	_, err := ReadRecords(context.Background(), strings.NewReader(log), 0, func(recs []Record) error {
		for _, r := range recs {
			ids = append(ids, r.Request.Verb)
		}
		return nil
	})
	if err != nil || len(ids) != 2 {
		t.Errorf("want two records (the completed watch, then the open one): %v %v", ids, err)
	}
}
