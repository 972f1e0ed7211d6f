package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestBuildWritesOneLayerImageWithTheBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gw")
	content := []byte("#!not really a binary\n")
	if err := os.WriteFile(bin, content, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "img.tar")
	o := options{binary: bin, path: "/usr/bin/gateway", tag: "toolhooks/gateway:test", out: out, user: "65532:65532", args: "--a --b"}
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(o.tag)
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/usr/bin/gateway" ||
		cfg.Config.User != "65532:65532" || strings.Join(cfg.Config.Cmd, " ") != "--a --b" {
		t.Fatalf("config = %+v", cfg.Config)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "usr/bin/gateway" {
			got, _ := io.ReadAll(tr)
			if !bytes.Equal(got, content) || h.Mode != 0o755 || h.Uid != 0 {
				t.Fatalf("binary in layer: %q mode %o uid %d", got, h.Mode, h.Uid)
			}
		}
	}
	if strings.Join(names, ",") != "usr/,usr/bin/,usr/bin/gateway" {
		t.Fatalf("layer entries = %v", names)
	}
	// The same binary gives the same image: the layer is reproducible.
	out2 := filepath.Join(dir, "img2.tar")
	o.out = out2
	if err := build(o); err != nil {
		t.Fatal(err)
	}
	img2, err := tarball.ImageFromPath(out2, &tag)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Fatalf("digests differ: %s %s", d1, d2)
	}
}

func TestBuildRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "b")
	if err := os.WriteFile(bin, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range []options{
		{binary: bin, path: "relative", tag: "a/b:c", out: filepath.Join(dir, "o")},
		{binary: bin, path: "/", tag: "a/b:c", out: filepath.Join(dir, "o")},
		{binary: bin, path: "/x/../y", tag: "a/b:c", out: filepath.Join(dir, "o")},
		{binary: bin, path: "/x", tag: "Bad Tag", out: filepath.Join(dir, "o")},
		{binary: filepath.Join(dir, "missing"), path: "/x", tag: "a/b:c", out: filepath.Join(dir, "o")},
		{binary: bin, path: "/x", tag: "a/b:c"},
	} {
		if err := build(o); err == nil {
			t.Errorf("build(%+v) succeeded; want an error", o)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "o")); !os.IsNotExist(err) {
		t.Errorf("a rejected build left an output file: %v", err)
	}
}
