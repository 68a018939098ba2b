package notifier

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fleet's firing alerts go in requests of at most MaxPerRequest, every
// one of them once, firing ones with endsAt a lease ahead.
func TestPostInChunks(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		var body []amAlert
		require.NoError(t, json.NewDecoder(r.Body).Decode(&body))
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(body))
		for _, a := range body {
			seen[a.Labels["host"]] = true
			assert.Equal(t, "2026-12-07T10:05:00Z", a.EndsAt)
		}
	}))
	defer srv.Close()
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	alerts := make([]Alert, 2*MaxPerRequest+5)
	for i := range alerts {
		alerts[i] = Alert{Key: Key{Host: fmt.Sprintf("h%d", i), Target: "git.repository:/r"}, Name: AlertDrift, StartsAt: now}
	}
	am := &Alertmanager{URL: srv.URL, Lease: 5 * time.Minute}
	require.NoError(t, am.Post(t.Context(), alerts, now))
	assert.Equal(t, []int{MaxPerRequest, MaxPerRequest, 5}, sizes)
	assert.Len(t, seen, len(alerts))
}
