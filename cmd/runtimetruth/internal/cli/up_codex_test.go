package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCodexRunAs: up never runs the Codex probe as root. As root it runs
// it as --codex-run-as, else as the user sudo ran up for, else as the
// owner of the current directory, and leaves Codex out (saying why) when
// root owns that directory.
func TestCodexRunAs(t *testing.T) {
	tests := []struct {
		name      string
		flag      string
		euid      int
		sudoUser  string
		cwdOwner  int
		wantRunAs string
		wantLeft  bool
	}{
		{name: "a user runs up", euid: 1000, cwdOwner: 0},
		{name: "a user names another user", flag: "alice", euid: 1000, wantRunAs: "alice"},
		{name: "root names a user", flag: "alice", euid: 0, cwdOwner: 0, wantRunAs: "alice"},
		{name: "sudo", euid: 0, sudoUser: "alice", cwdOwner: 0, wantRunAs: "alice"},
		{name: "sudo -u root", euid: 0, sudoUser: "root", cwdOwner: 0, wantLeft: true},
		{name: "root in a user's directory", euid: 0, cwdOwner: 1000},
		{name: "root in its own directory", euid: 0, cwdOwner: 0, wantLeft: true},
		{name: "root, directory unreadable", euid: 0, cwdOwner: -1, wantLeft: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runAs, why := codexRunAs(tc.flag, tc.euid, tc.sudoUser, tc.cwdOwner)
			assert.Equal(t, tc.wantRunAs, runAs)
			if tc.wantLeft {
				assert.Contains(t, why, "--codex-run-as USER")
			} else {
				assert.Empty(t, why)
			}
		})
	}
}
