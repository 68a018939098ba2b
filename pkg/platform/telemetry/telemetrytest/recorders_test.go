package telemetrytest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
)

// component is a stand-in for a service under test.
type component struct{ p telemetry.Providers }

func TestRecorders(t *testing.T) {
	var recs telemetrytest.Recorders[*component]
	a, err := recs.Make(t, func(p telemetry.Providers) (*component, error) { return &component{p}, nil })
	require.NoError(t, err)
	b, err := recs.Make(t, func(p telemetry.Providers) (*component, error) { return &component{p}, nil })
	require.NoError(t, err)
	for c, n := range map[*component]int64{a: 2, b: 5} {
		ctr, err := c.p.Meter("test").Int64Counter("test.count")
		require.NoError(t, err)
		ctr.Add(context.Background(), n)
	}
	assert.Equal(t, int64(2), recs.Sum(t, a, "test.count"), "each component reads its own recorder")
	assert.Equal(t, int64(5), recs.Sum(t, b, "test.count"))

	_, err = recs.Make(t, func(telemetry.Providers) (*component, error) { return nil, errors.New("refused") })
	require.EqualError(t, err, "refused")
}
