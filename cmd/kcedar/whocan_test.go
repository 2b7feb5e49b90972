package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/kcedar/kcedar/internal/accessreview"
)

func TestParseKubectlResource(t *testing.T) {
	s := testChecker(t).Schema
	for arg, want := range map[string][3]string{
		"pods":                   {"", "pods", ""},
		"pods/exec":              {"", "pods", "exec"},
		"deployments.apps":       {"apps", "deployments", ""},
		"deployments.v1.apps":    {"apps", "deployments", ""},
		"deployments.apps/scale": {"apps", "deployments", "scale"},
		"certificatesigningrequests.certificates.k8s.io/approval": {"certificates.k8s.io", "certificatesigningrequests", "approval"},
		"*": {"", "*", ""},
	} {
		g, r, sub, err := parseKubectlResource(s, arg)
		if err != nil || [3]string{g, r, sub} != want {
			t.Errorf("%s: %q %q %q %v, want %v", arg, g, r, sub, err, want)
		}
	}
}

func TestWhoCanAndCanICommands(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "p.cedar", `
@id("dev-read") permit(principal in k8s::Group::"dev", action in [k8s::Action::"get", k8s::Action::"list"], resource is apps::deployments)
when { resource.namespace == "team-a" };
@id("ci") permit(principal == k8s::ServiceAccount::"system:serviceaccount:team-a:ci", action == k8s::Action::"get", resource is apps::deployments);
@id("no-x") forbid(principal in k8s::Group::"contractors", action, resource is apps::deployments) when { resource.name == "x" };
`)
	out, code := run(t, newWhoCanCmd(), "get", "deployments.apps", "-n", "team-a", "--policies", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var resp accessreview.ResourceAccessReviewResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !slices.Equal(resp.Users, []string{"system:serviceaccount:team-a:ci"}) || !slices.Equal(resp.Groups, []string{"dev"}) || len(resp.Denied) != 1 {
		t.Errorf("who-can: %s", out)
	}
	out, code = run(t, newWhoCanCmd(), "get", "deployments.apps", "--policies", dir)
	if code != 0 || !strings.Contains(out, "SUBJECT") || !strings.Contains(out, `when resource.namespace == "team-a"`) || !strings.Contains(out, "DENIED") {
		t.Errorf("who-can table (exit %d):\n%s", code, out)
	}
	out, code = run(t, newCanICmd(), "--list", "--as", "bob", "--as-group", "dev", "-n", "team-a", "--policies", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var srr accessreview.SubjectRulesReview
	if err := json.Unmarshal([]byte(out), &srr); err != nil || srr.Status == nil || len(srr.Status.ResourceRules) != 1 || srr.Status.Incomplete {
		t.Errorf("can-i: %v %s", err, out)
	}
	out, code = run(t, newCanICmd(), "--list", "--as", "bob", "--as-group", "dev", "-n", "team-a", "--policies", dir)
	if code != 0 || !strings.Contains(out, "deployments.apps") || !strings.Contains(out, "[get list]") {
		t.Errorf("can-i table (exit %d):\n%s", code, out)
	}
	if _, code := run(t, newCanICmd(), "--as", "bob", "--policies", dir); code != 2 {
		t.Errorf("can-i without --list: exit %d", code)
	}
	if _, code := run(t, newWhoCanCmd(), "get", "--policies", dir); code != 2 {
		t.Errorf("who-can without a resource: exit %d", code)
	}
}
