// Command imagetar packs one static binary into a single-layer image FROM
// scratch and writes it as an image archive that `ctr images import` and
// `docker load` accept. The local e2e cluster cannot pull images, so the
// controller, gateway and pause images are built this way.
//
//	go run ./hack/imagetar -binary bin/manager -path /manager -tag toolhooks/controller:e2e -out controller.tar
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// options are the command-line settings of one image.
type options struct {
	binary string
	path   string
	tag    string
	out    string
	user   string
	args   string
}

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "static binary to put into the image (required)")
	flag.StringVar(&o.path, "path", "", "absolute path of the binary inside the image; also the entrypoint (required)")
	flag.StringVar(&o.tag, "tag", "", "image reference, e.g. toolhooks/gateway:e2e (required)")
	flag.StringVar(&o.out, "out", "", "image archive to write (required)")
	flag.StringVar(&o.user, "user", "65532:65532", "user the image runs as; empty for root")
	flag.StringVar(&o.args, "args", "", "default arguments (Cmd), space separated")
	flag.Parse()
	if err := build(o); err != nil {
		fmt.Fprintln(os.Stderr, "imagetar:", err)
		os.Exit(2)
	}
}

func build(o options) error {
	if o.binary == "" || o.path == "" || o.tag == "" || o.out == "" {
		return errors.New("-binary, -path, -tag and -out are required")
	}
	if !path.IsAbs(o.path) || path.Clean(o.path) != o.path || o.path == "/" {
		return fmt.Errorf("-path %q must be a clean absolute file path", o.path)
	}
	ref, err := name.NewTag(o.tag)
	if err != nil {
		return fmt.Errorf("-tag: %w", err)
	}
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return err
	}
	layerTar, err := layerArchive(o.path, bin)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = []string{o.path}
	cfg.Config.User = o.user
	cfg.Config.WorkingDir = "/"
	if o.args != "" {
		cfg.Config.Cmd = strings.Fields(o.args)
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return err
	}
	tmp := o.out + ".tmp"
	if err := tarball.WriteToFile(tmp, ref, img); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, o.out)
}

// layerArchive returns a tar holding the parent directories of p and the
// binary at p (mode 0755, owned by root), with fixed times so the same binary
// always gives the same layer digest.
func layerArchive(p string, bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	var dirs []string
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	for _, d := range dirs {
		hdr := &tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: 0o755, Size: int64(len(bin)), ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
