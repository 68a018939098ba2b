package buspolicy

import (
	"errors"
	"fmt"

	"github.com/nats-io/nkeys"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// ErrHost is returned for a host credential that cannot be rendered.
var ErrHost = errors.New("invalid host credential")

// Host is the collector credential of one host, where a deployment can
// give each host its own: its user in AccountCollectors may publish only
// that host's events and take only that host's collect-now requests
// (HostRole). The shared collector user (the collector role of Roles)
// stays for deployments that cannot; there a collector may publish in any
// host's name, and only the signature of its evidence (the verifier's
// enrollment) tells the hosts apart.
type Host struct {
	// Name is the host as its collector names it (the collector's host
	// setting, the host of its events); the subjects of its grants carry
	// events.Token(Name), as the collector's subjects do.
	Name string
	// User is a user name whose password is the server's
	// $<USER>_PASSWORD environment variable (as for the services' users:
	// upper case, '-' and '.' as '_'), or NKey the public key (U…) of an
	// nkey user whose seed only the host holds (its collector's
	// nats.nkey_seed_file). Exactly one is set.
	User string
	NKey string
}

// Validate reports whether h can be rendered.
func (h Host) Validate() error {
	switch {
	case h.Name == "":
		return fmt.Errorf("%w: no host name", ErrHost)
	case (h.User == "") == (h.NKey == ""):
		return fmt.Errorf("%w: host %q: set one of user and nkey", ErrHost, h.Name)
	case h.NKey != "" && !nkeys.IsValidPublicUserKey(h.NKey):
		return fmt.Errorf("%w: host %q: nkey %q is not a user public key (U…)", ErrHost, h.Name, h.NKey)
	case h.User != "" && !validUserName(h.User):
		return fmt.Errorf("%w: host %q: user %q: want letters, digits, '-', '_' and '.' only (it names an environment variable)", ErrHost, h.Name, h.User)
	}
	return nil
}

func validUserName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !userNameByte(c) {
			return false
		}
	}
	return s != ""
}

func userNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}

// HostRole is the role of one host's own collector credential: publish
// rt.evidence.<host>.>, rt.integrity.<host> and rt.collect.failed.<host>,
// subscribe rt.ctl.collect.<host> (replies through allow_responses) and
// the publish acknowledgements on _INBOX.>, with <host> events.Token(host).
func HostRole(host string) Role { return hostRole(events.Token(host)) }

// hostRole is HostRole for a subject token already made: events.Token of
// a host, or the JWT template of OperatorMode's host signing key.
func hostRole(tok string) Role {
	p := events.Prefix + "."
	return Role{
		Service: Collector,
		Publish: []Grant{
			{p + "evidence." + tok + ".>", "publish its evidence.collected"},
			{p + "integrity." + tok, "publish its runnable.modified"},
			{p + "collect.failed." + tok, "publish its collection.failed"},
		},
		Subscribe: []Grant{
			{p + "ctl.collect." + tok, "its collect-now requests; replies through allow_responses"},
			{Inbox, "publish acknowledgements"},
		},
		Responds: true,
	}
}
