package codexget

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// limits bound what an archive may unpack to: a hostile one must not fill the disk (X6).
type limits struct {
	entry   int64 // bytes in one file
	total   int64 // bytes in all files
	entries int   // files and folders
}

// defaultLimits leave room for the pinned package (about 420 MB unpacked, codex ~294 MB).
var defaultLimits = limits{entry: 512 << 20, total: 1 << 30, entries: 1000}

// unpack writes the files under package/vendor/<triple>/ of the tarball at tgz into dest (which
// it creates), and refuses the whole archive at the first entry that is not a plain file or
// folder with a local name: links (X4), devices and pipes (X5), names that climb out (X3), and
// anything over the limits (X6). Files are written through an os.Root on dest, so no name
// can reach outside it whatever the checks above miss.
func unpack(tgz, dest, triple string, lim limits) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%w: not a gzip file: %v", ErrUnsafeArchive, err)
	}
	if err := os.Mkdir(dest, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return err
	}
	defer root.Close()
	prefix := "package/vendor/" + triple + "/"
	tr := tar.NewReader(zr)
	var total int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: unreadable archive: %v", ErrUnsafeArchive, err)
		}
		if n >= lim.entries {
			return fmt.Errorf("%w: more than %d entries", ErrUnsafeArchive, lim.entries)
		}
		name, err := entryName(hdr)
		if err != nil {
			return err
		}
		rel, ok := strings.CutPrefix(name, prefix)
		if !ok || rel == "" {
			continue // package.json, README.md: not needed to run
		}
		if hdr.Typeflag == tar.TypeDir {
			if err := root.MkdirAll(rel, 0o755); err != nil {
				return fmt.Errorf("unpack %s: %w", name, err)
			}
			continue
		}
		if hdr.Size > lim.entry || total+hdr.Size > lim.total {
			return fmt.Errorf("%w: %s is %d bytes, over the limits (%d per file, %d in all)", ErrUnsafeArchive, name, hdr.Size, lim.entry, lim.total)
		}
		total += hdr.Size
		if err := writeEntry(root, rel, hdr, tr); err != nil {
			return fmt.Errorf("unpack %s: %w", name, err)
		}
	}
	if _, err := root.Lstat("bin/codex"); err != nil {
		return fmt.Errorf("%w: no %sbin/codex in the package", ErrUnsafeArchive, prefix)
	}
	return nil
}

// entryName is an entry's name if the entry is a plain file or folder with a local,
// slash-separated name; anything else refuses the archive.
func entryName(hdr *tar.Header) (string, error) {
	name := strings.TrimSuffix(hdr.Name, "/")
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir:
	case tar.TypeSymlink, tar.TypeLink:
		return "", fmt.Errorf("%w: %s is a link (to %q)", ErrUnsafeArchive, hdr.Name, hdr.Linkname)
	default:
		return "", fmt.Errorf("%w: %s is not a file or folder (tar type %q)", ErrUnsafeArchive, hdr.Name, hdr.Typeflag)
	}
	if name == "" || strings.ContainsAny(name, "\\\x00") || path.IsAbs(name) || path.Clean(name) != name ||
		name == ".." || strings.HasPrefix(name, "../") {
		return "", fmt.Errorf("%w: the name %q is not inside the package", ErrUnsafeArchive, hdr.Name)
	}
	return name, nil
}

// writeEntry writes one file, new (a name twice refuses the archive), executable if the
// archive says so, never setuid, setgid or sticky.
func writeEntry(root *os.Root, rel string, hdr *tar.Header, r io.Reader) error {
	if dir := path.Dir(rel); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	mode := os.FileMode(0o644)
	if hdr.Mode&0o111 != 0 {
		mode = 0o755
	}
	out, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("%w: %d of %d bytes", ErrUnsafeArchive, n, hdr.Size)
	}
	return err
}
