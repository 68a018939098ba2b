package notifier

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stored alert reads back as it was; a record under another alert's
// key, of another version, or with a member the record does not have is
// refused.
func TestStoredAlert(t *testing.T) {
	a := Alert{Key: Key{Host: "web 1", Target: "python.environment:/srv/.venv", Package: "pkg:pypi/requests@1.0"}, Name: AlertModified,
		Kind: "python.environment", Severity: "critical", Summary: "s", Description: "d",
		StartsAt: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC), Cause: "id"}
	b, err := encodeAlert(a)
	require.NoError(t, err)
	got, err := decodeAlert(alertKey(a.Key), b)
	require.NoError(t, err)
	assert.Equal(t, a, got)

	other := a.Key
	other.Package = ""
	_, err = decodeAlert(alertKey(other), b)
	assert.ErrorContains(t, err, "another alert")
	_, err = decodeAlert(alertKey(a.Key), []byte(`{"version":2}`))
	assert.ErrorContains(t, err, "version 2")
	_, err = decodeAlert(alertKey(a.Key), append(b[:len(b)-1], []byte(`,"extra":1}`)...))
	assert.Error(t, err)
	assert.NotEqual(t, alertKey(a.Key), alertKey(other))
}
