package binding

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// traceparentRE is the W3C traceparent format the hand-written check
// replaces.
var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$`)

const goodTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// checkTraceparent holds validTraceparent to the expression on s.
func checkTraceparent(t *testing.T, s string) {
	want := ""
	if m := traceparentRE.FindStringSubmatch(s); m == nil {
		want = "not a version-00 W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lower case)"
	} else if strings.Trim(m[1], "0") == "" || strings.Trim(m[2], "0") == "" {
		want = "all-zero trace-id or parent-id"
	}
	got := ""
	if err := validTraceparent(s); err != nil {
		got = err.Error()
	}
	assert.Equal(t, want, got, "traceparent %q", s)
}

var traceparentValues = []string{goodTraceparent, "", "00", strings.ToUpper(goodTraceparent),
	"01" + goodTraceparent[2:], goodTraceparent + "x", goodTraceparent[:54],
	"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
	"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
	"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bG-01",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",
}

// The traceparent check (one, without the regular expression) against
// the expression, on values around the edges.
func TestTraceparentValues(t *testing.T) {
	for _, v := range traceparentValues {
		checkTraceparent(t, v)
	}
}

func FuzzTraceparent(f *testing.F) {
	for _, v := range traceparentValues {
		f.Add(v)
	}
	f.Fuzz(checkTraceparent)
}
