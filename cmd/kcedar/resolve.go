package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/kcedar/kcedar/internal/engine/offline"
	"github.com/kcedar/kcedar/internal/schemagen"
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
	if r.Path != "" {
		if r.Verb != schemagen.AllVerbs && !containsString(schemagen.NonResourceVerbs, r.Verb) {
			msg := fmt.Sprintf("verb %q is not an HTTP verb of a non-resource request", r.Verb)
			if m := schemagen.Closest(r.Verb, schemagen.NonResourceVerbs); m != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", m)
			}
			return errors.New(msg + "; --raw sends it anyway")
		}
		return nil
	}
	arg := r.Resource
	if r.Subresource != "" {
		if strings.Contains(arg, "/") {
			return fmt.Errorf("--resource %q already names a subresource; drop --subresource %q", arg, r.Subresource)
		}
		arg += "/" + r.Subresource
	}
	res, err := s.ResolveResource(arg, r.APIGroup)
	if err != nil {
		return err
	}
	if err := s.CheckVerb(r.Verb, res.Resource); err != nil {
		return fmt.Errorf("%w; --raw sends it anyway", err)
	}
	r.APIGroup, r.Resource, r.Subresource = res.Key.Group, res.Key.Resource, res.Subresource
	if r.APIVersion == "" {
		r.APIVersion = res.Version
	}
	fmt.Fprintf(errw, "request: %s %s -> %s", r.Verb, res.GroupVersionResource(), res.EntityType)
	if len(res.Others) > 0 {
		var others []string
		for _, k := range res.Others {
			others = append(others, k.Resource+"."+k.Group)
		}
		fmt.Fprintf(errw, " (also: %s; qualify the resource to pick one)", strings.Join(others, ", "))
	}
	fmt.Fprintln(errw)
	return nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
