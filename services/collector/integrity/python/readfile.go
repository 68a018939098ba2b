package python

import (
	"fmt"
	"path/filepath"

	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// The size caps of the files read from an environment, which whoever can
// write the environment controls: every one is read with sysfile (a
// regular file only, never through a final symbolic link, and never
// blocking on a FIFO or device), the metadata files beneath their
// site-packages directory, and a file over its cap is refused unread
// (sysfile.ErrTooLarge). The caps are far above real files: of the 94
// distributions of a Python 3.11 site-packages with boto3, moto, sympy and
// pydantic, and Debian's dist-packages, the largest METADATA is 107 KiB
// (PKG-INFO 30 KiB), entry_points.txt 2.7 KiB, RECORD 1 MiB (botocore).
const (
	// maxPyvenvCfgSize bounds pyvenv.cfg (a few lines of key = value).
	maxPyvenvCfgSize = 64 << 10
	// maxMetadataSize bounds METADATA and PKG-INFO, whose body is the
	// project's long description (a README, sometimes with a changelog).
	maxMetadataSize = 1 << 20
	// maxDirectURLSize bounds direct_url.json (a URL and a hash).
	maxDirectURLSize = 64 << 10
	// maxEntryPointsSize bounds entry_points.txt.
	maxEntryPointsSize = 1 << 20
)

// readBeneath reads the regular file rel (a path relative to root, such
// as "pip-24.0.dist-info/RECORD") into *buf, reusing its capacity, as
// sysfile.ReadFileBeneath reads it: resolved beneath root (a symbolic
// link on the way that leads out is sysfile.ErrEscape), a symbolic link
// in the last component not followed, a FIFO or device refused without
// blocking (sysfile.ErrNotRegular), and a file over limit bytes refused
// unread or when it grows past limit while read (sysfile.ErrTooLarge).
// Errors name root/rel. It returns the bytes read, *buf's first bytes.
func readBeneath(root, rel string, limit int64, buf *[]byte) ([]byte, error) {
	fail := func(err error) ([]byte, error) { return nil, fmt.Errorf("%s: %w", filepath.Join(root, rel), err) }
	d, err := sysfile.OpenDir(root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", root, err)
	}
	defer func() { _ = d.Close() }()
	var p sysfile.Path
	p.Set("", rel)
	var w sysfile.Walk
	f, err := sysfile.OpenBeneath(d, &p, &w)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = f.Close() }() // read only: nothing to lose
	var st sysfile.Stat
	if err := f.Stat(&st); err != nil {
		return fail(err)
	}
	if !st.Regular() {
		return fail(sysfile.ErrNotRegular)
	}
	if st.Size > limit {
		return fail(fmt.Errorf("%w: %d bytes, over %d", sysfile.ErrTooLarge, st.Size, limit))
	}
	b := (*buf)[:0]
	if int64(cap(b)) <= st.Size {
		b = make([]byte, 0, st.Size+512) // room to see the end of file in one read
	}
	defer func() { *buf = b[:0] }()
	for {
		if int64(len(b)) > limit {
			return fail(fmt.Errorf("%w: grew past %d bytes while read", sysfile.ErrTooLarge, limit))
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):min(cap(b), int(limit)+1)])
		b = b[:len(b)+n]
		if err != nil {
			return fail(err)
		}
		if n == 0 {
			return b, nil
		}
	}
}
