package logtest_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runtimetruth/runtimetruth/pkg/platform/logtest"
)

// Loggers on several goroutines write to one Buffer while the test reads
// it; run with -race.
func TestBufferConcurrent(t *testing.T) {
	var b logtest.Buffer
	log := slog.New(slog.NewTextHandler(&b, nil))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				log.Info("line")
				_ = b.String()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 200, strings.Count(b.String(), "msg=line\n"))
}
