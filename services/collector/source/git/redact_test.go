package git_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runtimetruth/runtimetruth/services/collector/source/git"
)

func TestRedactURL(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "https with user and token", in: "https://user:tok@host/x", want: "https://host/x"},
		{name: "https with token as user", in: "https://ghp_abc123@github.com/org/repo.git", want: "https://github.com/org/repo.git"},
		{name: "https oauth2 token", in: "https://oauth2:glpat-xyz@gitlab.example.com:8443/g/p.git", want: "https://gitlab.example.com:8443/g/p.git"},
		{name: "https with query token", in: "https://host/x.git?token=secret#frag", want: "https://host/x.git"},
		{name: "https query without path", in: "https://host?access_token=secret", want: "https://host"},
		{name: "https plain", in: "https://github.com/runtimetruth/runtimetruth.git", want: "https://github.com/runtimetruth/runtimetruth.git"},
		{name: "http userinfo with at sign in password", in: "http://u:p@ss@host/x", want: "http://host/x"},
		{name: "git protocol", in: "git://user@host/x", want: "git://host/x"},
		{name: "file url", in: "file:///srv/repo.git", want: "file:///srv/repo.git"},
		{name: "ssh keeps login", in: "ssh://git@github.com/org/repo.git", want: "ssh://git@github.com/org/repo.git"},
		{name: "ssh drops password", in: "ssh://git:secret@host:22/repo.git", want: "ssh://host:22/repo.git"},
		{name: "git+ssh keeps login", in: "git+ssh://deploy@host/repo", want: "git+ssh://deploy@host/repo"},
		{name: "scp keeps login", in: "git@github.com:org/repo.git", want: "git@github.com:org/repo.git"},
		{name: "scp with at sign in path", in: "git@host:team/user@example.com.git", want: "git@host:team/user@example.com.git"},
		{name: "scp drops odd user", in: "tok%3Dx@host:repo.git", want: "host:repo.git"},
		{name: "scp drops password", in: "user:pw@host:repo.git", want: "host:repo.git"},
		{name: "scp without user", in: "host:repo.git", want: "host:repo.git"},
		{name: "scp path with at sign", in: "host:repo@v1.git", want: "host:repo@v1.git"},
		{name: "absolute path", in: "/srv/git/repo.git", want: "/srv/git/repo.git"},
		{name: "relative path with colon after slash", in: "../a:b/repo", want: "../a:b/repo"},
		{name: "empty", in: "", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, git.RedactURL(tc.in))
		})
	}
}
