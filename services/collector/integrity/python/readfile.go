package python

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
