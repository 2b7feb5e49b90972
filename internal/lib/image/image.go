// Package image builds kcedar's container image offline: one layer holding
// the static binary at /kcedar, no base image, run as the non-root user
// 65532, written as an OCI image archive (a tar of an OCI image layout, as
// `podman load` and `skopeo copy oci-archive:...` read it). It uses
// go-containerregistry; no daemon, no registry.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image layout constants.
const (
	BinaryPath = "/kcedar"
	User       = "65532:65532"
)

// Options describe the image.
type Options struct {
	Binary  string // the static kcedar binary (CGO_ENABLED=0)
	OS      string // default linux
	Arch    string // default amd64
	Version string // org.opencontainers.image.version
	// Created is the image's creation time; zero gives the Unix epoch, so
	// the same binary always gives the same image digest.
	Created time.Time
}

// Build returns the image.
func Build(o Options) (v1.Image, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, err
	}
	if !isStaticELF(bin) {
		return nil, fmt.Errorf("%s is not a static ELF binary: build it with CGO_ENABLED=0 GOOS=linux", o.Binary)
	}
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: BinaryPath[1:], Mode: 0o555, Size: int64(len(bin)), Typeflag: tar.TypeReg, ModTime: o.Created, Uid: 0, Gid: 0}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = or(o.OS, "linux"), or(o.Arch, "amd64")
	cf.Created = v1.Time{Time: o.Created}
	cf.Config.Entrypoint = []string{BinaryPath}
	cf.Config.Cmd = []string{"serve"}
	cf.Config.User = User
	cf.Config.WorkingDir = "/"
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "kcedar",
		"org.opencontainers.image.source":  "https://github.com/kcedar/kcedar",
		"org.opencontainers.image.version": o.Version,
	}
	return mutate.ConfigFile(img, cf)
}

// WriteArchive writes img as an OCI image archive to path, tagged ref
// (e.g. "kcedar:v1.0.0").
func WriteArchive(img v1.Image, path, ref string) error {
	dir, err := os.MkdirTemp("", "kcedar-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name, hdr.ModTime, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = filepath.ToSlash(rel), time.Unix(0, 0), 0, 0, "", ""
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		_, err = io.Copy(tw, in)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadArchive reads the (single) image of an OCI image archive.
func ReadArchive(path string) (v1.Image, error) {
	dir, err := os.MkdirTemp("", "kcedar-image-read-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := extractTar(path, dir); err != nil {
		return nil, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("%s holds %d manifests, want 1", path, len(m.Manifests))
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, err
	}
	// Materialize it: the layout directory goes away on return.
	return inMemory(img)
}

// extractTar writes the directories and regular files of the tar archive at
// path under dir, refusing entries that would land outside it.
func extractTar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if rel, err := filepath.Rel(dir, target); err != nil || rel == ".." || len(rel) > 2 && rel[:3] == "../" {
			return fmt.Errorf("archive entry %q escapes the archive", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = writeEntry(tr, target)
		}
		if err != nil {
			return err
		}
	}
}

// writeEntry writes the current tar entry to target.
func writeEntry(tr *tar.Reader, target string) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	data, err := io.ReadAll(tr)
	if err != nil {
		return err
	}
	return os.WriteFile(target, data, 0o644)
}

// inMemory copies img's layers and config into memory, so it outlives the
// files it was read from.
func inMemory(img v1.Image) (v1.Image, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	var copies []v1.Layer
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		cl, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, err
		}
		copies = append(copies, cl)
	}
	out, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), copies...)
	if err != nil {
		return nil, err
	}
	return mutate.ConfigFile(out, cf)
}

// FileFrom returns the contents of path (e.g. "/kcedar") in img's layers.
func FileFrom(img v1.Image, path string) ([]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s is not in the image", path)
		}
		if err != nil {
			return nil, err
		}
		if "/"+hdr.Name == path || hdr.Name == path {
			return io.ReadAll(tr)
		}
	}
}

// isStaticELF reports whether b is an ELF executable without an interpreter
// (PT_INTERP), i.e. one that runs in an image with no libc.
func isStaticELF(b []byte) bool {
	if len(b) < 64 || string(b[:4]) != "\x7fELF" {
		return false
	}
	return !bytes.Contains(b[:min(len(b), 4096)], []byte("/lib64/ld-linux")) && !bytes.Contains(b[:min(len(b), 4096)], []byte("/lib/ld-"))
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
