package catalog

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Limits of a models.dev tree read from disk or an archive.
const (
	MaxTreeFiles     = 20000
	MaxTreeFileBytes = 1 << 20
	MaxTreeBytes     = 64 << 20
)

// ReadTree reads the TOML files of a models.dev tree from a directory, a .tar, .tar.gz/.tgz or
// .zip archive, keyed by their slash-separated path inside it. Files that are not .toml are left out.
func ReadTree(path string) (map[string][]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read models.dev tree: %w", err)
	}
	if st.IsDir() {
		return readDir(os.DirFS(path))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read models.dev archive: %w", err)
	}
	defer f.Close()
	switch {
	case strings.HasSuffix(path, ".zip"):
		zr, err := zip.NewReader(f, st.Size())
		if err != nil {
			return nil, fmt.Errorf("read models.dev archive %s: %w", path, err)
		}
		return readDir(zr)
	case strings.HasSuffix(path, ".tar.gz"), strings.HasSuffix(path, ".tgz"):
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("read models.dev archive %s: %w", path, err)
		}
		return readTar(gz)
	case strings.HasSuffix(path, ".tar"):
		return readTar(f)
	}
	return nil, fmt.Errorf("read models.dev tree %s: not a directory, .tar, .tar.gz, .tgz or .zip", path)
}

type treeAcc struct {
	files map[string][]byte
	total int
}

func (a *treeAcc) add(name string, r io.Reader) error {
	if !strings.HasSuffix(name, ".toml") {
		return nil
	}
	if len(a.files) >= MaxTreeFiles {
		return fmt.Errorf("more than %d TOML files", MaxTreeFiles)
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxTreeFileBytes+1))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > MaxTreeFileBytes {
		return fmt.Errorf("%s: larger than %d bytes", name, MaxTreeFileBytes)
	}
	if a.total += len(b); a.total > MaxTreeBytes {
		return fmt.Errorf("more than %d bytes of TOML", MaxTreeBytes)
	}
	a.files[filepath.ToSlash(name)] = b
	return nil
}

func readDir(fsys fs.FS) (map[string][]byte, error) {
	acc := &treeAcc{files: map[string][]byte{}}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		f, err := fsys.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return acc.add(p, f)
	})
	if err != nil {
		return nil, fmt.Errorf("read models.dev tree: %w", err)
	}
	return acc.files, nil
}

func readTar(r io.Reader) (map[string][]byte, error) {
	acc := &treeAcc{files: map[string][]byte{}}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return acc.files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read models.dev archive: %w", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if err := acc.add(h.Name, tr); err != nil {
			return nil, fmt.Errorf("read models.dev archive: %w", err)
		}
	}
}
