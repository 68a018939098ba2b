package spool_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/services/collector/spool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, dir string, opts spool.Options) *spool.Spool {
	t.Helper()
	s, err := spool.Open(dir, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func rec(i int) []byte { return fmt.Appendf(nil, "record-%04d", i) }

// drain reads n records, committing each, and returns their payloads.
func drain(t *testing.T, s *spool.Spool, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		r, err := s.Next(ctx)
		cancel()
		require.NoError(t, err)
		out = append(out, string(r.Data))
		require.NoError(t, s.Commit(r))
	}
	return out
}

func names(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, string(rec(i)))
	}
	return out
}

func assertEmpty(t *testing.T, s *spool.Spool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := s.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestFIFOAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, spool.Options{})
	for i := range 5 {
		require.NoError(t, s.Append(rec(i)))
	}
	require.NoError(t, s.Append(rec(5), rec(6)))
	n, b := s.Pending()
	assert.Equal(t, 7, n)
	assert.Equal(t, int64(7*(8+len(rec(0)))), b)

	assert.Equal(t, names(0, 3), drain(t, s, 3))
	// Read but not committed: delivered again after a restart.
	_, err := s.Next(t.Context())
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = open(t, dir, spool.Options{})
	assert.Empty(t, s.Recovered())
	n, _ = s.Pending()
	assert.Equal(t, 4, n)
	assert.Equal(t, names(3, 7), drain(t, s, 4))
	assertEmpty(t, s)
	n, b = s.Pending()
	assert.Zero(t, n)
	assert.Zero(t, b)
	require.NoError(t, s.WaitEmpty(t.Context()))
}

func TestNextWaitsForAppend(t *testing.T) {
	s := open(t, t.TempDir(), spool.Options{})
	got := make(chan string)
	go func() {
		r, err := s.Next(t.Context())
		if err != nil {
			got <- err.Error()
			return
		}
		got <- string(r.Data)
	}()
	time.Sleep(20 * time.Millisecond) // let Next block (the result is the same either way)
	require.NoError(t, s.Append(rec(1)))
	select {
	case v := <-got:
		assert.Equal(t, string(rec(1)), v)
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not wake up")
	}
}

func TestWaitEmptyAndClose(t *testing.T) {
	s := open(t, t.TempDir(), spool.Options{})
	require.NoError(t, s.Append(rec(1)))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, s.WaitEmpty(ctx), context.DeadlineExceeded)

	done := make(chan error)
	go func() { done <- s.WaitEmpty(t.Context()) }()
	drain(t, s, 1)
	require.NoError(t, <-done)

	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "twice")
	_, err := s.Next(t.Context())
	require.ErrorIs(t, err, spool.ErrClosed)
	require.ErrorIs(t, s.Append(rec(2)), spool.ErrClosed)
}

func TestFullRefusesNewRecordsAndKeepsOld(t *testing.T) {
	t.Run("max events", func(t *testing.T) {
		s := open(t, t.TempDir(), spool.Options{MaxEvents: 3})
		require.NoError(t, s.Append(rec(0), rec(1)))
		require.ErrorIs(t, s.Append(rec(2), rec(3)), spool.ErrFull, "a batch is all or nothing")
		require.NoError(t, s.Append(rec(2)))
		require.ErrorIs(t, s.Append(rec(3)), spool.ErrFull)
		n, _ := s.Pending()
		assert.Equal(t, 3, n)
		assert.Equal(t, names(0, 1), drain(t, s, 1))
		require.NoError(t, s.Append(rec(3)), "room again after a delivery")
		assert.Equal(t, names(1, 4), drain(t, s, 3))
	})
	t.Run("max bytes", func(t *testing.T) {
		size := int64(8 + len(rec(0)))
		s := open(t, t.TempDir(), spool.Options{MaxBytes: 2*size + size/2})
		require.NoError(t, s.Append(rec(0), rec(1)))
		require.ErrorIs(t, s.Append(rec(2)), spool.ErrFull)
		assert.Equal(t, names(0, 2), drain(t, s, 2))
		require.NoError(t, s.Append(rec(2)))
	})
	t.Run("too large", func(t *testing.T) {
		s := open(t, t.TempDir(), spool.Options{MaxRecordBytes: 4})
		require.ErrorIs(t, s.Append([]byte("12345")), spool.ErrTooLarge)
		require.NoError(t, s.Append([]byte("1234")))
	})
}

func TestSegmentsRollAndAreDeletedOnceDelivered(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, spool.Options{SegmentBytes: 64})
	for i := range 20 {
		require.NoError(t, s.Append(rec(i)))
	}
	assert.Greater(t, s.Segments(), 5)
	assert.Equal(t, names(0, 10), drain(t, s, 10))
	require.NoError(t, s.Close())

	s = open(t, dir, spool.Options{SegmentBytes: 64})
	assert.Equal(t, names(10, 20), drain(t, s, 10))
	assert.Equal(t, 1, s.Segments())
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	require.NoError(t, err)
	assert.Len(t, segs, 1, "delivered segments are deleted")
	require.NoError(t, s.Append(rec(20)))
	assert.Equal(t, names(20, 21), drain(t, s, 1))
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.seg"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	sort.Strings(segs)
	return segs[len(segs)-1]
}

// closedSpoolOfFour writes records 0 to 3 to a spool in dir, one Append
// each, closes it and returns its last segment, for a test to damage
// before it opens the spool again.
func closedSpoolOfFour(t *testing.T, dir string) (segment string) {
	t.Helper()
	s := open(t, dir, spool.Options{})
	for i := range 4 {
		require.NoError(t, s.Append(rec(i)))
	}
	require.NoError(t, s.Close())
	return lastSegment(t, dir)
}

func TestTruncatedTailIsCutAndThePrefixKept(t *testing.T) {
	dir := t.TempDir()
	seg := closedSpoolOfFour(t, dir)
	st, err := os.Stat(seg)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(seg, st.Size()-3)) // a torn last write

	s := open(t, dir, spool.Options{})
	rc := s.Recovered()
	require.Len(t, rc, 1)
	assert.Equal(t, "truncated record", rc[0].Reason)
	assert.Equal(t, int64(8+len(rec(0))-3), rc[0].Bytes)
	n, _ := s.Pending()
	assert.Equal(t, 3, n)
	assert.Equal(t, names(0, 3), drain(t, s, 3))
	require.NoError(t, s.Append(rec(9)), "appends continue after the cut")
	assert.Equal(t, []string{string(rec(9))}, drain(t, s, 1))
}

func TestChecksumMismatchCutsTheSegment(t *testing.T) {
	dir := t.TempDir()
	seg := closedSpoolOfFour(t, dir)
	data, err := os.ReadFile(seg)
	require.NoError(t, err)
	recLen := 8 + len(rec(0))
	data[8+recLen+8+3] ^= 0xFF // a payload byte of the second record
	require.NoError(t, os.WriteFile(seg, data, 0o600))

	s := open(t, dir, spool.Options{})
	rc := s.Recovered()
	require.Len(t, rc, 1)
	assert.Equal(t, "record checksum mismatch", rc[0].Reason)
	assert.Equal(t, int64(3*recLen), rc[0].Bytes)
	assert.Equal(t, names(0, 1), drain(t, s, 1))
	assertEmpty(t, s)
}

func TestBadCursorRedeliversFromTheOldestSegment(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, spool.Options{})
	require.NoError(t, s.Append(rec(0), rec(1), rec(2)))
	drain(t, s, 2)
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cursor"), []byte("garbage"), 0o600))

	s = open(t, dir, spool.Options{})
	require.Len(t, s.Recovered(), 1)
	assert.Equal(t, names(0, 3), drain(t, s, 3), "duplicates rather than losses")
}

func TestEmptySegmentFromACrashedCreate(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, spool.Options{SegmentBytes: 16})
	require.NoError(t, s.Append(rec(0)))
	require.NoError(t, s.Close())
	// A crash between creating the next segment and writing its header.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000000000000002.seg"), nil, 0o600))

	s = open(t, dir, spool.Options{SegmentBytes: 16})
	assert.Empty(t, s.Recovered(), "an empty file held nothing")
	require.NoError(t, s.Append(rec(1)))
	assert.Equal(t, names(0, 2), drain(t, s, 2))
}

func TestCommitIsIdempotent(t *testing.T) {
	s := open(t, t.TempDir(), spool.Options{})
	require.NoError(t, s.Append(rec(0), rec(1)))
	r, err := s.Next(t.Context())
	require.NoError(t, err)
	require.NoError(t, s.Commit(r))
	require.NoError(t, s.Commit(r))
	n, _ := s.Pending()
	assert.Equal(t, 1, n)
}
