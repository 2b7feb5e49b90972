package schemagen

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/cedar-policy/cedar-go/types"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// connectListParams are the connect options fields that Kubernetes sends as
// repeated query parameters (lists), which OpenAPI describes as scalars.
var connectListParams = map[string]map[string]bool{
	"PodExecOptions":        {"command": true},
	"PodPortForwardOptions": {"ports": true},
}

// virtualResource is a resource Kubernetes authorizes that discovery does not list.
type virtualResource struct {
	key            ResourceKey
	verbs          []string
	namespaced     bool
	anySubresource bool
}

var virtualResources = []virtualResource{
	// Impersonation.
	{key: ResourceKey{Resource: "users"}, verbs: []string{"impersonate"}},
	{key: ResourceKey{Resource: "groups"}, verbs: []string{"impersonate"}},
	{key: ResourceKey{Group: "authentication.k8s.io", Resource: "uids"}, verbs: []string{"impersonate"}},
	{key: ResourceKey{Group: "authentication.k8s.io", Resource: "userextras"}, verbs: []string{"impersonate"}, anySubresource: true},
	// CSR signers: the name is the signerName.
	{key: ResourceKey{Group: "certificates.k8s.io", Resource: "signers"}, verbs: []string{"approve", "sign", "attest"}},
	// Kubelet API (the kubelet's webhook authorization asks the apiserver).
	{key: ResourceKey{Resource: "nodes", Subresource: "checkpoint"}, verbs: kubeletVerbs},
	{key: ResourceKey{Resource: "nodes", Subresource: "configz"}, verbs: kubeletVerbs},
	{key: ResourceKey{Resource: "nodes", Subresource: "healthz"}, verbs: kubeletVerbs},
	{key: ResourceKey{Resource: "nodes", Subresource: "log"}, verbs: kubeletVerbs},
	{key: ResourceKey{Resource: "nodes", Subresource: "metrics"}, verbs: kubeletVerbs},
	{key: ResourceKey{Resource: "nodes", Subresource: "pods"}, verbs: kubeletVerbs},
	{key: ResourceKey{Resource: "nodes", Subresource: "proxy"}, verbs: kubeletVerbs},
	{key: ResourceKey{Resource: "nodes", Subresource: "spec"}, verbs: kubeletVerbs},
	{key: ResourceKey{Resource: "nodes", Subresource: "stats"}, verbs: kubeletVerbs},
}

var kubeletVerbs = []string{"create", "delete", "get", "patch", "update"}

// extraVerbs are verbs Kubernetes checks on existing resources beyond the ones
// discovery lists.
var extraVerbs = []struct {
	key   ResourceKey
	verbs []string
}{
	{ResourceKey{Resource: "serviceaccounts"}, []string{"impersonate"}},
	{ResourceKey{Group: "rbac.authorization.k8s.io", Resource: "roles"}, []string{"bind", "escalate"}},
	{ResourceKey{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, []string{"bind", "escalate"}},
}

// discovered is a resource from discovery, before typing.
type discovered struct {
	key        ResourceKey
	namespaced bool
	verbs      map[string]bool
	versions   map[string]schema.GroupVersionKind // request version -> object kind
	noKind     []string                           // versions without a responseKind
	names      Names
}

// Generate builds the typed schema of the documents' cluster: one entity type per
// resource and subresource in discovery (plus the virtual ones Kubernetes
// authorizes), typed from the OpenAPI v3 definitions of their kinds.
// Everything that cannot be typed exactly is reported in Schema.Warnings.
func Generate(docs *Documents) (*Schema, error) {
	if docs == nil {
		return nil, errors.New("no documents")
	}
	groups := docs.Groups()
	if len(groups) == 0 {
		return nil, errors.New("discovery lists no API groups")
	}
	idx, err := parseOpenAPI(docs.OpenAPI)
	if err != nil {
		return nil, err
	}
	c := newConverter(idx)
	meta, _, reason := c.ref(objectMetaDef)
	if meta == nil {
		return nil, fmt.Errorf("OpenAPI documents: cannot type object metadata from %s: %s", objectMetaDef, reason)
	}
	found, order, err := collectDiscovery(groups, &c.warnings)
	if err != nil {
		return nil, err
	}
	g := &generator{
		c:            c,
		s:            &Schema{Resources: map[ResourceKey]*Resource{}, ObjectMeta: meta},
		objects:      map[schema.GroupVersionKind]*ObjectVersion{},
		untyped:      map[schema.GroupVersionKind]bool{},
		entityOwners: map[types.EntityType]ResourceKey{},
	}
	for _, key := range order {
		g.addDiscovered(key, found[key])
	}
	g.addVirtualResources()
	g.addExtraVerbs()
	g.s.addImpersonation(func(key ResourceKey, et types.EntityType) bool {
		return g.claimEntityType(key, et, "identity resource")
	})
	return g.finish(), nil
}

// generator holds the state of one Generate: the OpenAPI converter and the
// schema being built.
type generator struct {
	c *converter
	s *Schema
	// objects caches the object version of each kind; untyped records the
	// kinds that could not be typed.
	objects map[schema.GroupVersionKind]*ObjectVersion
	untyped map[schema.GroupVersionKind]bool
	// entityOwners maps each entity type to the resource that has it.
	entityOwners map[types.EntityType]ResourceKey
}

// claimEntityType gives et to the resource key, or warns (the resource, of the
// kind what, is skipped) and returns false when another resource has it.
func (g *generator) claimEntityType(key ResourceKey, et types.EntityType, what string) bool {
	if other, dup := g.entityOwners[et]; dup {
		g.c.warnings = append(g.c.warnings, fmt.Sprintf("%s: entity type %s is already used by %s: %s skipped", keyString(key), et, keyString(other), what))
		return false
	}
	g.entityOwners[et] = key
	return true
}

// addDiscovered adds the resource d found in discovery at key, typed by the
// object versions of its kinds.
func (g *generator) addDiscovered(key ResourceKey, d *discovered) {
	r := &Resource{
		Key:        key,
		EntityType: ResourceEntityType(key.Group, key.Resource, key.Subresource),
		Namespaced: d.namespaced,
		Verbs:      sortedSet(d.verbs),
		Versions:   map[string]*ObjectVersion{},
		Names:      d.names,
	}
	if !g.claimEntityType(key, r.EntityType, "resource") {
		return
	}
	for _, v := range d.noKind {
		g.c.warnings = append(g.c.warnings, fmt.Sprintf("%s %s: discovery gives no responseKind: no object type", keyString(key), v))
	}
	for _, v := range sortedKeys(d.versions) {
		if v == AttrAPIVersion || v == AttrKind || v == AttrMetadata {
			g.c.warnings = append(g.c.warnings, fmt.Sprintf("%s: version %q clashes with the object's %s attribute: no object type", keyString(key), v, v))
			continue
		}
		if ov := g.objectVersion(d.versions[v]); ov != nil {
			r.Versions[v] = ov
		}
	}
	g.s.Resources[key] = r
}

// objectVersion types the objects of gvk once, and returns the same object
// version for every resource version of that kind (nil when it cannot be
// typed).
func (g *generator) objectVersion(gvk schema.GroupVersionKind) *ObjectVersion {
	if ov, ok := g.objects[gvk]; ok || g.untyped[gvk] {
		return ov
	}
	ov := g.c.objectVersion(gvk)
	if ov == nil {
		g.untyped[gvk] = true
	} else {
		g.objects[gvk] = ov
	}
	return ov
}

// addVirtualResources adds the virtualResources discovery did not list.
func (g *generator) addVirtualResources() {
	for _, vr := range virtualResources {
		if _, ok := g.s.Resources[vr.key]; ok {
			continue
		}
		et := ResourceEntityType(vr.key.Group, vr.key.Resource, vr.key.Subresource)
		if !g.claimEntityType(vr.key, et, "virtual resource") {
			continue
		}
		verbs := append([]string(nil), vr.verbs...)
		sort.Strings(verbs)
		g.s.Resources[vr.key] = &Resource{
			Key: vr.key, EntityType: et, Namespaced: vr.namespaced, Verbs: verbs,
			Versions: map[string]*ObjectVersion{}, Virtual: true, AnySubresource: vr.anySubresource,
		}
	}
}

// addExtraVerbs adds the extraVerbs to the resources that have them.
func (g *generator) addExtraVerbs() {
	for _, ev := range extraVerbs {
		if r, ok := g.s.Resources[ev.key]; ok {
			set := map[string]bool{}
			for _, v := range append(append([]string(nil), r.Verbs...), ev.verbs...) {
				set[v] = true
			}
			r.Verbs = sortedSet(set)
		}
	}
}

// finish declares the verbs, trims the converted definitions to those the
// resources use, and moves them, the maps and the warnings into the schema.
func (g *generator) finish() *Schema {
	s, c := g.s, g.c
	s.Verbs = declaredVerbs(s.Resources)
	c.cutCycles()
	c.prune(s)
	s.Definitions = c.defs
	s.OpenAPINames = map[string]string{}
	for name := range c.defs {
		s.OpenAPINames[name] = c.origin[name]
	}
	s.Maps = c.maps
	s.Warnings = sortedSet(toSet(c.warnings))
	return s
}

// declaredVerbs are the standard, non-resource and impersonation verbs plus every verb of
// the resources, sorted, without "*".
func declaredVerbs(resources map[ResourceKey]*Resource) []string {
	verbs := map[string]bool{}
	for _, v := range StandardVerbs {
		verbs[v] = true
	}
	for _, v := range NonResourceVerbs {
		verbs[v] = true
	}
	for _, v := range ImpersonationVerbs() {
		verbs[v] = true
	}
	for _, r := range resources {
		for _, v := range r.Verbs {
			verbs[v] = true
		}
	}
	delete(verbs, AllVerbs)
	return sortedSet(verbs)
}

func keyString(k ResourceKey) string {
	g := k.Group
	if g == "" {
		g = "core"
	}
	if k.Subresource == "" {
		return g + "/" + k.Resource
	}
	return g + "/" + k.Resource + "/" + k.Subresource
}

// collectDiscovery merges the versions of each resource and subresource; order
// is the order of first appearance.
func collectDiscovery(groups []apidiscoveryv2.APIGroupDiscovery, warnings *[]string) (map[ResourceKey]*discovered, []ResourceKey, error) {
	found := map[ResourceKey]*discovered{}
	var order []ResourceKey
	add := func(key ResourceKey, version string, namespaced bool, verbs []string, kind *schema.GroupVersionKind) {
		d := found[key]
		if d == nil {
			d = &discovered{key: key, namespaced: namespaced, verbs: map[string]bool{}, versions: map[string]schema.GroupVersionKind{}}
			found[key] = d
			order = append(order, key)
		} else if d.namespaced != namespaced {
			*warnings = append(*warnings, fmt.Sprintf("%s %s: scope differs from the other versions: using the first", keyString(key), version))
		}
		for _, v := range verbs {
			if v != "" {
				d.verbs[v] = true
			}
		}
		if kind == nil {
			d.noKind = append(d.noKind, version)
			return
		}
		if _, dup := d.versions[version]; !dup {
			d.versions[version] = *kind
		}
	}
	for _, g := range groups {
		group := g.Name
		for _, v := range g.Versions {
			if v.Version == "" {
				return nil, nil, fmt.Errorf("discovery: group %q lists a version without a name", group)
			}
			for _, r := range v.Resources {
				if r.Resource == "" || strings.Contains(r.Resource, "/") {
					return nil, nil, fmt.Errorf("discovery: group %q version %s: invalid resource name %q", group, v.Version, r.Resource)
				}
				namespaced := r.Scope == apidiscoveryv2.ScopeNamespace
				if r.Scope != apidiscoveryv2.ScopeNamespace && r.Scope != apidiscoveryv2.ScopeCluster {
					return nil, nil, fmt.Errorf("discovery: %s: invalid scope %q", keyString(ResourceKey{Group: group, Resource: r.Resource}), r.Scope)
				}
				key := ResourceKey{Group: group, Resource: r.Resource}
				add(key, v.Version, namespaced, r.Verbs, responseKind(group, v.Version, r.ResponseKind))
				found[key].names.merge(v.Version, r.SingularResource, r.ShortNames, r.ResponseKind)
				for _, sr := range r.Subresources {
					if sr.Subresource == "" || strings.Contains(sr.Subresource, "/") {
						return nil, nil, fmt.Errorf("discovery: %s: invalid subresource name %q", keyString(key), sr.Subresource)
					}
					skey := ResourceKey{Group: group, Resource: r.Resource, Subresource: sr.Subresource}
					add(skey, v.Version, namespaced, sr.Verbs, responseKind(group, v.Version, sr.ResponseKind))
					found[skey].names.merge(v.Version, "", nil, nil)
				}
			}
		}
	}
	return found, order, nil
}

// responseKind resolves a discovery responseKind: an empty version means the
// resource's own group and version.
func responseKind(group, version string, k *metav1.GroupVersionKind) *schema.GroupVersionKind {
	if k == nil || k.Kind == "" {
		return nil
	}
	gvk := schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
	if gvk.Kind == "" {
		return nil
	}
	if gvk.Version == "" {
		gvk.Group, gvk.Version = group, version
	}
	return &gvk
}

// objectVersion types the object of one kind: its OpenAPI definition without
// apiVersion, kind and metadata, or, for connect options, the query parameters
// of the connect operations.
func (c *converter) objectVersion(gvk schema.GroupVersionKind) *ObjectVersion {
	ov := &ObjectVersion{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Name:       ObjectTypeName(gvk.Group, gvk.Version, gvk.Kind),
	}
	where := loc{def: ov.APIVersion + " " + gvk.Kind}
	if name, ok := c.idx.byGVK[gvk]; ok {
		def := c.idx.defs[name]
		where = loc{def: name}
		t, _, reason := c.convert(def, where, 0)
		if t == nil {
			c.warnf(where, "untyped (%s): no object type for %s", reason, gvk)
			return nil
		}
		if r, ok := t.(*RefType); ok {
			t = c.defs[r.Name]
		}
		rec, ok := t.(*RecordType)
		if !ok {
			c.warnf(where, "kind %s is not an object: no object type", gvk)
			return nil
		}
		ov.Fields = &RecordType{Attributes: map[string]*Attribute{}}
		for n, a := range rec.Attributes {
			if n == AttrAPIVersion || n == AttrKind || n == AttrMetadata {
				continue
			}
			cp := *a
			ov.Fields.Attributes[n] = &cp
		}
		return ov
	}
	if params, ok := c.idx.connect[gvk]; ok {
		ov.Fields = &RecordType{Attributes: map[string]*Attribute{}}
		for _, n := range sortedKeys(params) {
			t, enum, reason := c.convert(params[n], where.child(n), 0)
			if t == nil {
				c.warnf(where.child(n), "untyped connect parameter (%s): attribute omitted", reason)
				continue
			}
			if connectListParams[gvk.Kind][n] {
				t = &SetType{Element: t}
			}
			ov.Fields.Attributes[n] = &Attribute{Type: t, Optional: true, Enum: enum}
		}
		return ov
	}
	c.warnf(where, "no OpenAPI definition or connect operation for kind %s: no object type", gvk)
	return nil
}

// cutCycles removes recursion from the common types: a depth-first search over
// the definitions in sorted order (and attributes in sorted order) cuts every
// back edge by omitting the attribute that holds it. Maps end the search: their
// values are entity tags, and entities may refer to each other.
func (c *converter) cutCycles() {
	const (
		white = iota
		gray
		black
	)
	color := map[string]int{}
	var visit func(name string)
	var walk func(t Type, l loc) bool
	walk = func(t Type, l loc) bool {
		switch t := t.(type) {
		case *RefType:
			switch color[t.Name] {
			case gray:
				return true
			case white:
				visit(t.Name)
			}
		case *SetType:
			return walk(t.Element, l.child("[]"))
		case *RecordType:
			for _, n := range sortedKeys(t.Attributes) {
				if walk(t.Attributes[n].Type, l.child(n)) {
					c.warnf(l.child(n), "recursive reference to %s cut: attribute omitted", c.origin[refName(t, n)])
					delete(t.Attributes, n)
				}
			}
		}
		return false
	}
	visit = func(name string) {
		color[name] = gray
		t := c.defs[name]
		if walk(t, loc{def: c.origin[name]}) {
			c.warnf(loc{def: c.origin[name]}, "definition is only a recursive reference: typed as an empty record")
			c.defs[name] = &RecordType{Attributes: map[string]*Attribute{}}
		}
		color[name] = black
	}
	for _, name := range sortedKeys(c.defs) {
		if color[name] == white {
			visit(name)
		}
	}
}

// refName is only used for the warning text of a cut: it finds the definition an
// attribute refers to (before it is deleted).
func refName(r *RecordType, attr string) string {
	a, ok := r.Attributes[attr]
	if !ok {
		return ""
	}
	t := a.Type
	for {
		switch tt := t.(type) {
		case *SetType:
			t = tt.Element
		case *RefType:
			return tt.Name
		default:
			return ""
		}
	}
}

// prune drops common types and map types that nothing reachable from the
// resources refers to (any more, after cutting cycles).
func (c *converter) prune(s *Schema) {
	defs := map[string]bool{}
	maps := map[types.EntityType]bool{}
	var walk func(t Type)
	walk = func(t Type) {
		switch t := t.(type) {
		case *RefType:
			if !defs[t.Name] {
				defs[t.Name] = true
				if d, ok := c.defs[t.Name]; ok {
					walk(d)
				}
			}
		case *SetType:
			walk(t.Element)
		case *MapType:
			if !maps[t.EntityType] {
				maps[t.EntityType] = true
				walk(t.Value)
			}
		case *RecordType:
			for _, a := range t.Attributes {
				walk(a.Type)
			}
		}
	}
	walk(s.ObjectMeta)
	for _, r := range s.Resources {
		for _, ov := range r.Versions {
			walk(ov.Fields)
		}
	}
	for n := range c.defs {
		if !defs[n] {
			delete(c.defs, n)
		}
	}
	for n := range c.maps {
		if !maps[n] {
			delete(c.maps, n)
		}
	}
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k, ok := range m {
		if ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func toSet(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		m[s] = true
	}
	return m
}
