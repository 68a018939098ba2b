package python_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/python"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/proctest"
)

// TestVerifyWrongSizeIsNotRead checks that a file whose size is not the
// one its RECORD row lists (here a 10 GiB sparse file put in place of a
// 1-byte one) is reported modified by its size without being read: the
// report does not count it as hashed and the process reads far less than
// the file holds. The second and third checks take the parsed RECORD and
// the other files from the stat cache.
func TestVerifyWrongSizeIsNotRead(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	venv, site := handVenv(t, dir, "3.11", "version = 3.11.4\n")
	writeDist(t, site, "big", "1.0", nil, map[string]string{"big/__init__.py": "B = 1\n", "big/data.bin": "x"})
	const huge = 10 << 30
	require.NoError(t, os.Truncate(filepath.Join(site, "big", "data.bin"), huge))
	env, err := python.Open(ctx, venv, python.OpenOptions{})
	require.NoError(t, err)
	store, err := integrity.OpenStore(filepath.Join(dir, "state"))
	require.NoError(t, err)
	for i, opts := range []python.Options{{}, {Store: store}, {Store: store}, {Store: store}} {
		opts.All = true
		before := proctest.BytesRead(t)
		rep, err := python.Verify(ctx, env, opts)
		require.NoError(t, err)
		read := proctest.BytesRead(t) - before
		require.Len(t, rep.Results, 1)
		r := rep.Results[0]
		assert.Equal(t, integrity.StatusModified, r.Status, "check %d: %s", i, r.Reason)
		assert.Equal(t, 3, r.Files) // __init__, data.bin, METADATA
		require.Len(t, r.Changes, 1)
		assert.Equal(t, "big/data.bin", r.Changes[0].Path)
		assert.Equal(t, integrity.ChangeModified, r.Changes[0].Kind)
		assert.Equal(t, "size:10737418240", r.Changes[0].Observed, "observed by its size")
		assert.Equal(t, 2, rep.Hashed+rep.Cached, "check %d: data.bin is neither hashed nor cached", i)
		assert.Less(t, read, int64(64<<20), "check %d: the 10 GiB file is not read (%d bytes read in all)", i, read)
	}
}
