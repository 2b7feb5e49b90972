package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/kcedar/kcedar/internal/lib/safetext"
	"github.com/kcedar/kcedar/internal/schemagen"
	"github.com/kcedar/kcedar/internal/tools/offline"
)

// resolveRequestFlags resolves a request given by flags the way kubectl
// resolves resource arguments (pods, po, pod, Pod, deployments.apps,
// deployments.v1.apps, pods/exec, deploy/scale; --api-group narrows, "core"
// for the core group) and checks the verb, then rewrites r to the resolved
// group, version, resource and subresource and tells errw what the request
// became. An unknown resource or verb is an error with a "did you mean"
// hint. --raw skips this (requests as written, as a SubjectAccessReview
// carries them).
func resolveRequestFlags(s *schemagen.Schema, r *offline.RequestSpec, errw io.Writer) error {
	res, err := r.Resolve(s)
	if err != nil {
		return fmt.Errorf("%w; --raw sends it anyway", err)
	}
	if res == nil {
		return nil // a non-resource request
	}
	safetext.Fprintf(errw, "request: %s %s -> %s", r.Verb, res.GroupVersionResource(), res.EntityType)
	if len(res.Others) > 0 {
		var others []string
		for _, k := range res.Others {
			others = append(others, k.Resource+"."+k.Group)
		}
		safetext.Fprintf(errw, " (also: %s; qualify the resource to pick one)", strings.Join(others, ", "))
	}
	fmt.Fprintln(errw)
	return nil
}
