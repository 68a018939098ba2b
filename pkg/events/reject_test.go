package events_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
)

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		s, mark string
		n       int
		want    string
	}{
		{"short", "…", 10, "short"},
		{"exactly10!", "…", 10, "exactly10!"},
		{"a longer message", "…", 10, "a longe…"}, // 7 bytes and the 3 of "…"
		{"a longer message", "", 10, "a longer m"},
		{"a longer message", "...", 10, "a longe..."},
		{"ééééé", "", 5, "éé"}, // never half a character
		{"ééééé", "…", 6, "é…"},
		{"bad \xff byte", "", 20, "bad \uFFFD byte"},
		{"xyz", "…", 2, "xy"}, // no room for the mark
	} {
		got := binding.Clip(tc.s, tc.n, tc.mark)
		assert.Equal(t, tc.want, got, "Clip(%q, %d, %q)", tc.s, tc.n, tc.mark)
	}
}
