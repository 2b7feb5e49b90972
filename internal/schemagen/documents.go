package schemagen

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
)

// Documents are the discovery and OpenAPI v3 documents of a cluster: everything
// Generate needs. They come from a live cluster (FetchLive), a directory written by
// WriteDir (ReadDir), or the snapshot embedded in kcedar (Default).
type Documents struct {
	// API is the aggregated discovery document (apidiscovery.k8s.io/v2
	// APIGroupDiscoveryList) of /api: the core group. Nil if absent.
	API *apidiscoveryv2.APIGroupDiscoveryList
	// APIs is the aggregated discovery document of /apis: all other groups. Nil if
	// absent.
	APIs *apidiscoveryv2.APIGroupDiscoveryList
	// OpenAPI maps each path of the /openapi/v3 index ("api/v1",
	// "apis/apps/v1", ...) to its OpenAPI v3 document (JSON).
	OpenAPI map[string][]byte
}

// Groups returns the discovery groups of /api followed by those of /apis, in
// discovery order (the first version of a group is its preferred version).
func (d *Documents) Groups() []apidiscoveryv2.APIGroupDiscovery {
	var out []apidiscoveryv2.APIGroupDiscovery
	for _, l := range []*apidiscoveryv2.APIGroupDiscoveryList{d.API, d.APIs} {
		if l != nil {
			out = append(out, l.Items...)
		}
	}
	return out
}

// Layout of a documents directory (WriteDir, ReadDir):
//
//	discovery/api.json        aggregated discovery of /api
//	discovery/apis.json       aggregated discovery of /apis
//	openapi/v3/<path>.json    OpenAPI v3 document of <path>, e.g. openapi/v3/apis/apps/v1.json
const (
	discoveryDir = "discovery"
	openAPIDir   = "openapi/v3"
	apiFile      = "discovery/api.json"
	apisFile     = "discovery/apis.json"
)

// maxDocumentSize bounds each file ReadDir reads.
const maxDocumentSize = 256 << 20

// aggregated discovery media types.
const (
	discoveryGroup     = "apidiscovery.k8s.io"
	discoveryKind      = "APIGroupDiscoveryList"
	acceptAggregatedV2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	acceptAggregatedB1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
)

//go:embed all:default
var defaultFS embed.FS

var (
	defaultOnce sync.Once
	defaultDocs *Documents
	defaultErr  error
)

// Default returns the documents of stock Kubernetes v1.37 embedded in kcedar
// (captured from a real kube-apiserver by hack/capture-default.sh). Each call
// returns a fresh copy that the caller may modify.
func Default() (*Documents, error) {
	defaultOnce.Do(func() {
		sub, err := fs.Sub(defaultFS, "default")
		if err != nil {
			defaultErr = err
			return
		}
		defaultDocs, defaultErr = ReadDir(sub)
		if defaultErr != nil {
			defaultErr = fmt.Errorf("embedded default documents: %w", defaultErr)
		}
	})
	if defaultErr != nil {
		return nil, defaultErr
	}
	return defaultDocs.clone(), nil
}

func (d *Documents) clone() *Documents {
	out := &Documents{OpenAPI: make(map[string][]byte, len(d.OpenAPI))}
	if d.API != nil {
		out.API = d.API.DeepCopy()
	}
	if d.APIs != nil {
		out.APIs = d.APIs.DeepCopy()
	}
	for k, v := range d.OpenAPI {
		out.OpenAPI[k] = v // documents are never modified in place
	}
	return out
}

// ReadDir reads documents written by WriteDir (or saved by hand in the same
// layout) from fsys. At least one discovery document must be present.
func ReadDir(fsys fs.FS) (*Documents, error) {
	docs := &Documents{OpenAPI: map[string][]byte{}}
	var err error
	if docs.API, err = readDiscovery(fsys, apiFile); err != nil {
		return nil, err
	}
	if docs.APIs, err = readDiscovery(fsys, apisFile); err != nil {
		return nil, err
	}
	if docs.API == nil && docs.APIs == nil {
		return nil, fmt.Errorf("no discovery documents: expected %s and/or %s", apiFile, apisFile)
	}
	err = fs.WalkDir(fsys, openAPIDir, func(name string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			return nil
		}
		data, err := readFileLimited(fsys, name)
		if err != nil {
			return err
		}
		if !json.Valid(data) {
			return fmt.Errorf("%s: invalid JSON", name)
		}
		docs.OpenAPI[strings.TrimSuffix(strings.TrimPrefix(name, openAPIDir+"/"), ".json")] = data
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no OpenAPI v3 documents: directory %s is missing", openAPIDir)
	}
	if err != nil {
		return nil, err
	}
	if len(docs.OpenAPI) == 0 {
		return nil, fmt.Errorf("no OpenAPI v3 documents in %s", openAPIDir)
	}
	return docs, nil
}

func readFileLimited(fsys fs.FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(limitReader{f, maxDocumentSize + 1})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if n > maxDocumentSize {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxDocumentSize)
	}
	return buf.Bytes(), nil
}

type limitReader struct {
	f fs.File
	n int64
}

func (l limitReader) Read(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	return l.f.Read(p)
}

func readDiscovery(fsys fs.FS, name string) (*apidiscoveryv2.APIGroupDiscoveryList, error) {
	data, err := readFileLimited(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := decodeDiscovery(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return l, nil
}

// decodeDiscovery decodes an aggregated discovery document (v2 or v2beta1, which
// have the same shape).
func decodeDiscovery(data []byte) (*apidiscoveryv2.APIGroupDiscoveryList, error) {
	var l apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("decoding aggregated discovery: %w", err)
	}
	if l.Kind != discoveryKind || !strings.HasPrefix(l.APIVersion, discoveryGroup+"/v2") {
		return nil, fmt.Errorf("not an aggregated discovery document: kind %q, apiVersion %q (want %s, %s/v2)", l.Kind, l.APIVersion, discoveryKind, discoveryGroup)
	}
	l.APIVersion = apidiscoveryv2.SchemeGroupVersion.String()
	return &l, nil
}

// WriteDir writes the documents into dir (created if needed) in the layout ReadDir
// reads, replacing the discovery/ and openapi/ subdirectories. The output is
// deterministic: JSON keys are sorted and indented, "description" fields are
// stripped, and of the OpenAPI paths only the connect operations (whose query
// parameters type the connect options such as PodExecOptions) are kept, as
// nothing else in "paths" is used by Generate.
func (d *Documents) WriteDir(dir string) error {
	for p := range d.OpenAPI {
		if err := checkDocPath(p); err != nil {
			return err
		}
	}
	for _, sub := range []string{discoveryDir, "openapi"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return err
		}
	}
	write := func(name string, data []byte) error {
		full := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		return os.WriteFile(full, data, 0o644)
	}
	for _, f := range []struct {
		name string
		l    *apidiscoveryv2.APIGroupDiscoveryList
	}{{apiFile, d.API}, {apisFile, d.APIs}} {
		if f.l == nil {
			continue
		}
		raw, err := json.Marshal(f.l)
		if err != nil {
			return err
		}
		out, err := normalizeJSON(raw, normalizeDiscovery)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if err := write(f.name, out); err != nil {
			return err
		}
	}
	for _, p := range sortedKeys(d.OpenAPI) {
		out, err := normalizeJSON(d.OpenAPI[p], normalizeOpenAPI)
		if err != nil {
			return fmt.Errorf("OpenAPI document %s: %w", p, err)
		}
		if err := write(openAPIDir+"/"+p+".json", out); err != nil {
			return err
		}
	}
	return nil
}

// checkDocPath rejects OpenAPI paths that cannot be written safely as files.
func checkDocPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || path.Clean(p) != p {
		return fmt.Errorf("invalid OpenAPI document path %q", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("invalid OpenAPI document path %q", p)
		}
		for _, r := range seg {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~", r)) {
				return fmt.Errorf("invalid OpenAPI document path %q", p)
			}
		}
	}
	return nil
}

type normalizeMode int

const (
	normalizeDiscovery normalizeMode = iota
	normalizeOpenAPI
)

// normalizeJSON re-encodes a JSON document with sorted keys and one-space
// indentation. For OpenAPI documents it strips "description" members of schema,
// operation, parameter and response objects (never data such as property names,
// defaults, enums or extensions) and keeps only path items that have a connect
// operation. For discovery documents it drops the null creationTimestamp that
// ObjectMeta marshals.
func normalizeJSON(data []byte, mode normalizeMode) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	switch mode {
	case normalizeOpenAPI:
		root, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("not a JSON object")
		}
		if paths, ok := root["paths"].(map[string]any); ok {
			for p, item := range paths {
				if !isConnectPathItem(item) {
					delete(paths, p)
				}
			}
		}
		v = stripDescriptions(v, false)
	case normalizeDiscovery:
		dropNullCreationTimestamps(v)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func isConnectPathItem(item any) bool {
	m, ok := item.(map[string]any)
	if !ok {
		return false
	}
	for _, op := range m {
		if o, ok := op.(map[string]any); ok && o["x-kubernetes-action"] == "connect" {
			return true
		}
	}
	return false
}

// nameMaps are OpenAPI members whose values map arbitrary names (which may well
// be "description") to objects.
var nameMaps = map[string]bool{
	"properties": true, "patternProperties": true, "definitions": true, "schemas": true,
	"paths": true, "responses": true, "headers": true, "content": true, "encoding": true,
	"securitySchemes": true, "examples": true, "links": true, "callbacks": true,
	"requestBodies": true, "variables": true, "mapping": true, "dependencies": true,
	"scopes": true,
}

// dataMembers hold data, not OpenAPI objects: never rewritten.
var dataMembers = map[string]bool{"default": true, "example": true, "enum": true, "const": true}

func stripDescriptions(v any, nameMap bool) any {
	switch v := v.(type) {
	case map[string]any:
		if nameMap {
			for k, e := range v {
				v[k] = stripDescriptions(e, false)
			}
			return v
		}
		for k, e := range v {
			switch {
			case k == "description":
				delete(v, k)
			case dataMembers[k] || strings.HasPrefix(k, "x-"):
			default:
				v[k] = stripDescriptions(e, nameMaps[k])
			}
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = stripDescriptions(e, false)
		}
		return v
	default:
		return v
	}
}

func dropNullCreationTimestamps(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "metadata" {
				if m, ok := e.(map[string]any); ok {
					if ts, ok := m["creationTimestamp"]; ok && ts == nil {
						delete(m, "creationTimestamp")
					}
				}
			}
			dropNullCreationTimestamps(e)
		}
	case []any:
		for _, e := range v {
			dropNullCreationTimestamps(e)
		}
	}
}

// FetchLive reads the discovery and OpenAPI v3 documents of a live cluster.
func FetchLive(cfg *rest.Config) (*Documents, error) {
	return FetchLiveContext(context.Background(), cfg)
}

// FetchLiveContext is FetchLive with a context.
func FetchLiveContext(ctx context.Context, cfg *rest.Config) (*Documents, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	docs := &Documents{OpenAPI: map[string][]byte{}}

	var (
		wg                sync.WaitGroup
		apiErr, apisErr   error
		openErr           error
		api, apis         *apidiscoveryv2.APIGroupDiscoveryList
		openapiDocs       map[string][]byte
		legacy, legacyAPI bool
	)
	wg.Add(3)
	go func() {
		defer wg.Done()
		api, legacyAPI, apiErr = fetchAggregated(ctx, dc, "/api")
	}()
	go func() {
		defer wg.Done()
		apis, legacy, apisErr = fetchAggregated(ctx, dc, "/apis")
	}()
	go func() {
		defer wg.Done()
		openapiDocs, openErr = fetchOpenAPIV3(ctx, dc)
	}()
	wg.Wait()
	if err := errors.Join(apiErr, apisErr, openErr); err != nil {
		return nil, err
	}
	if legacy || legacyAPI {
		// The server has no aggregated discovery (Kubernetes < 1.26 or disabled):
		// build the same documents from legacy discovery.
		api, apis, err = fetchLegacyDiscovery(dc)
		if err != nil {
			return nil, err
		}
	}
	docs.API, docs.APIs, docs.OpenAPI = api, apis, openapiDocs
	return docs, nil
}

// fetchAggregated GETs an aggregated discovery document; legacy reports that the
// server answered with legacy discovery instead.
func fetchAggregated(ctx context.Context, dc *discovery.DiscoveryClient, absPath string) (l *apidiscoveryv2.APIGroupDiscoveryList, legacy bool, err error) {
	data, err := dc.RESTClient().Get().AbsPath(absPath).
		SetHeader("Accept", acceptAggregatedV2+","+acceptAggregatedB1+",application/json").
		Do(ctx).Raw()
	if err != nil {
		return nil, false, fmt.Errorf("discovery %s: %w", absPath, err)
	}
	var probe metav1.TypeMeta
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, false, fmt.Errorf("discovery %s: %w", absPath, err)
	}
	if probe.Kind != discoveryKind {
		return nil, true, nil
	}
	l, err = decodeDiscovery(data)
	if err != nil {
		return nil, false, fmt.Errorf("discovery %s: %w", absPath, err)
	}
	return l, false, nil
}

// fetchLegacyDiscovery converts legacy discovery into aggregated documents.
func fetchLegacyDiscovery(dc *discovery.DiscoveryClient) (api, apis *apidiscoveryv2.APIGroupDiscoveryList, err error) {
	groups, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		return nil, nil, fmt.Errorf("legacy discovery: %w", err)
	}
	byGV := map[string]*metav1.APIResourceList{}
	for _, l := range lists {
		byGV[l.GroupVersion] = l
	}
	newList := func() *apidiscoveryv2.APIGroupDiscoveryList {
		return &apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{
			Kind: discoveryKind, APIVersion: apidiscoveryv2.SchemeGroupVersion.String()}}
	}
	api, apis = newList(), newList()
	for _, g := range groups {
		ag := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g.Name}}
		versions := g.Versions
		// Preferred version first, as in aggregated discovery.
		sort.SliceStable(versions, func(i, j int) bool {
			return versions[i].Version == g.PreferredVersion.Version && versions[j].Version != g.PreferredVersion.Version
		})
		for _, v := range versions {
			l := byGV[v.GroupVersion]
			if l == nil {
				continue
			}
			ag.Versions = append(ag.Versions, legacyVersion(v.Version, l))
		}
		if g.Name == "" {
			api.Items = append(api.Items, ag)
		} else {
			apis.Items = append(apis.Items, ag)
		}
	}
	return api, apis, nil
}

func legacyVersion(version string, l *metav1.APIResourceList) apidiscoveryv2.APIVersionDiscovery {
	out := apidiscoveryv2.APIVersionDiscovery{Version: version}
	parents := map[string]int{}
	for _, r := range l.APIResources {
		if strings.Contains(r.Name, "/") {
			continue
		}
		scope := apidiscoveryv2.ScopeCluster
		if r.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		parents[r.Name] = len(out.Resources)
		out.Resources = append(out.Resources, apidiscoveryv2.APIResourceDiscovery{
			Resource:         r.Name,
			ResponseKind:     &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
			Scope:            scope,
			SingularResource: r.SingularName,
			Verbs:            r.Verbs,
			ShortNames:       r.ShortNames,
			Categories:       r.Categories,
		})
	}
	for _, r := range l.APIResources {
		parent, sub, ok := strings.Cut(r.Name, "/")
		if !ok {
			continue
		}
		i, ok := parents[parent]
		if !ok {
			continue
		}
		out.Resources[i].Subresources = append(out.Resources[i].Subresources, apidiscoveryv2.APISubresourceDiscovery{
			Subresource:  sub,
			ResponseKind: &metav1.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind},
			Verbs:        r.Verbs,
		})
	}
	return out
}

// fetchOpenAPIV3 reads every document of the /openapi/v3 index.
func fetchOpenAPIV3(ctx context.Context, dc *discovery.DiscoveryClient) (map[string][]byte, error) {
	paths, err := openapi.ToClientWithContext(dc.OpenAPIV3()).PathsWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("OpenAPI v3 index: %w", err)
	}
	out := make(map[string][]byte, len(paths))
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 8)
	)
	for _, p := range sortedKeys(paths) {
		gv := paths[p]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			data, err := gv.SchemaWithContext(ctx, "application/json")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("OpenAPI v3 %s: %w", p, err))
				return
			}
			out[p] = data
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
