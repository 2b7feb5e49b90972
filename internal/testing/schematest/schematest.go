// Package schematest builds a small hand-written schema model for tests of
// the packages that consume schemagen's model, independent of the generator.
package schematest

import "github.com/kcedar/kcedar/internal/schemagen"

var (
	str  = schemagen.StringType{}
	long = schemagen.LongType{}
)

func opt(t schemagen.Type) *schemagen.Attribute { return &schemagen.Attribute{Type: t, Optional: true} }

func record(attrs map[string]*schemagen.Attribute) *schemagen.RecordType {
	return &schemagen.RecordType{Attributes: attrs}
}

// StringMap is the map type of labels and annotations.
var StringMap = &schemagen.MapType{EntityType: "k8s::StringMap", Value: str}

// Schema returns a schema with core pods (+exec, +status), nodes, namespaces,
// serviceaccounts (+token), configmaps, secrets, persistentvolumes,
// apps deployments (+scale), certificates.k8s.io certificatesigningrequests,
// rbac roles, and the users/groups impersonation resources.
func Schema() *schemagen.Schema {
	objectMeta := record(map[string]*schemagen.Attribute{
		"name":              opt(str),
		"namespace":         opt(str),
		"generateName":      opt(str),
		"labels":            opt(StringMap),
		"annotations":       opt(StringMap),
		"finalizers":        opt(&schemagen.SetType{Element: str}),
		"creationTimestamp": opt(schemagen.DatetimeType{}),
		"generation":        opt(long),
	})
	container := record(map[string]*schemagen.Attribute{
		"name":  {Type: str},
		"image": opt(str),
		"resources": opt(record(map[string]*schemagen.Attribute{
			"limits":   opt(StringMap),
			"requests": opt(StringMap),
		})),
		"securityContext": opt(record(map[string]*schemagen.Attribute{
			"privileged": opt(schemagen.BoolType{}),
		})),
	})
	podSpec := record(map[string]*schemagen.Attribute{
		"nodeName":           opt(str),
		"serviceAccountName": opt(str),
		"priority":           opt(long),
		"containers":         opt(&schemagen.SetType{Element: &schemagen.RefType{Name: "test::Container"}}),
		"nodeSelector":       opt(StringMap),
	})
	s := &schemagen.Schema{
		Resources:   map[schemagen.ResourceKey]*schemagen.Resource{},
		Definitions: map[string]schemagen.Type{"test::Container": container},
		ObjectMeta:  objectMeta,
		Verbs:       append([]string(nil), schemagen.StandardVerbs...),
	}
	add := func(group, resource, sub string, namespaced bool, verbs []string, apiVersion, kind string, fields *schemagen.RecordType) {
		key := schemagen.ResourceKey{Group: group, Resource: resource, Subresource: sub}
		r := &schemagen.Resource{Key: key, EntityType: schemagen.ResourceEntityType(group, resource, sub), Namespaced: namespaced, Verbs: verbs, Versions: map[string]*schemagen.ObjectVersion{}}
		if fields != nil {
			version := apiVersion
			if i := lastSlash(apiVersion); i >= 0 {
				version = apiVersion[i+1:]
			}
			r.Versions[version] = &schemagen.ObjectVersion{APIVersion: apiVersion, Kind: kind, Fields: fields}
		}
		s.Resources[key] = r
	}
	crud := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	add("", "pods", "", true, crud, "v1", "Pod", record(map[string]*schemagen.Attribute{"spec": opt(podSpec)}))
	add("", "pods", "status", true, []string{"get", "patch", "update"}, "v1", "Pod", record(map[string]*schemagen.Attribute{"spec": opt(podSpec)}))
	add("", "pods", "exec", true, []string{"create", "get"}, "v1", "PodExecOptions", record(map[string]*schemagen.Attribute{
		"command":   opt(&schemagen.SetType{Element: str}),
		"container": opt(str),
		"stdin":     opt(schemagen.BoolType{}),
	}))
	add("", "nodes", "", false, crud, "v1", "Node", record(map[string]*schemagen.Attribute{
		"spec": opt(record(map[string]*schemagen.Attribute{"unschedulable": opt(schemagen.BoolType{})})),
	}))
	add("", "namespaces", "", false, crud, "v1", "Namespace", record(map[string]*schemagen.Attribute{}))
	add("", "serviceaccounts", "", true, append(append([]string(nil), crud...), "impersonate"), "v1", "ServiceAccount", record(map[string]*schemagen.Attribute{}))
	add("", "serviceaccounts", "token", true, []string{"create"}, "authentication.k8s.io/v1", "TokenRequest", record(map[string]*schemagen.Attribute{
		"spec": opt(record(map[string]*schemagen.Attribute{"audiences": opt(&schemagen.SetType{Element: str})})),
	}))
	add("", "configmaps", "", true, crud, "v1", "ConfigMap", record(map[string]*schemagen.Attribute{"data": opt(StringMap)}))
	add("", "secrets", "", true, crud, "v1", "Secret", record(map[string]*schemagen.Attribute{"type": opt(str)}))
	add("", "persistentvolumes", "", false, crud, "v1", "PersistentVolume", record(map[string]*schemagen.Attribute{
		"spec": opt(record(map[string]*schemagen.Attribute{"storageClassName": opt(str)})),
	}))
	add("apps", "deployments", "", true, crud, "apps/v1", "Deployment", record(map[string]*schemagen.Attribute{
		"spec": opt(record(map[string]*schemagen.Attribute{"replicas": opt(long)})),
	}))
	add("apps", "deployments", "scale", true, []string{"get", "patch", "update"}, "autoscaling/v1", "Scale", record(map[string]*schemagen.Attribute{
		"spec": opt(record(map[string]*schemagen.Attribute{"replicas": opt(long)})),
	}))
	add("certificates.k8s.io", "certificatesigningrequests", "", false, crud, "certificates.k8s.io/v1", "CertificateSigningRequest", record(map[string]*schemagen.Attribute{
		"spec": opt(record(map[string]*schemagen.Attribute{"signerName": {Type: str}})),
	}))
	add("rbac.authorization.k8s.io", "roles", "", true, append(append([]string(nil), crud...), "bind", "escalate"), "rbac.authorization.k8s.io/v1", "Role", record(map[string]*schemagen.Attribute{}))
	add("", "users", "", false, []string{"impersonate"}, "", "", nil)
	add("", "groups", "", false, []string{"impersonate"}, "", "", nil)
	return s
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}
