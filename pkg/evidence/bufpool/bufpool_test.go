package bufpool_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/bufpool"
)

// TestGetIsEmpty: whatever a user left in a buffer, the next Get has
// length zero.
func TestGetIsEmpty(t *testing.T) {
	for range 100 {
		b := bufpool.Get()
		assert.Empty(t, *b)
		*b = append(*b, "left behind"...)
		bufpool.Put(b)
	}
}

// TestPutDropsLargeBuffers: a buffer past MaxPooled is not kept, so the
// pool never hands it out again.
func TestPutDropsLargeBuffers(t *testing.T) {
	for range 100 {
		b := bufpool.Get()
		assert.LessOrEqual(t, cap(*b), bufpool.MaxPooled)
		*b = make([]byte, 0, bufpool.MaxPooled+1)
		bufpool.Put(b)
	}
}
