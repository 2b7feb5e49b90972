// Command mkimage writes kcedar's OCI image archive (make image):
//
//	go run ./hack/mkimage -binary bin/kcedar-linux-amd64 -o bin/kcedar-image.tar -tag kcedar:dev
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kcedar/kcedar/internal/lib/image"
)

func main() {
	var o image.Options
	var out, tag string
	flag.StringVar(&o.Binary, "binary", "", "static kcedar binary (CGO_ENABLED=0 GOOS=linux)")
	flag.StringVar(&o.Arch, "arch", "amd64", "the binary's GOARCH")
	flag.StringVar(&o.Version, "version", "", "image version label")
	flag.StringVar(&out, "o", "bin/kcedar-image.tar", "OCI image archive to write")
	flag.StringVar(&tag, "tag", "kcedar:dev", "image reference name stored in the archive")
	flag.Parse()
	img, err := image.Build(o)
	if err == nil {
		err = image.WriteArchive(img, out, tag)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
	d, _ := img.Digest()
	fmt.Printf("wrote %s (%s, %s)\n", out, tag, d)
}
