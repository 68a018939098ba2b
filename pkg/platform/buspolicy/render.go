package buspolicy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// Markdown renders the roles as markdown: per service, a table of the
// allowed publish and subscribe subjects with the reason for each, and
// then the role of a host's own collector credential (HostRole, <host>
// standing for the host's subject token).
func Markdown() string {
	var b strings.Builder
	b.WriteString("| service | may | subject | why |\n|---|---|---|---|\n")
	roles := Roles()
	host := hostRole("<host>")
	host.Service = "collector (own credential of a host)"
	for _, r := range append(roles, host) {
		for _, g := range r.Publish {
			fmt.Fprintf(&b, "| %s | publish | `%s` | %s |\n", r.Service, g.Subject, g.Why)
		}
		for _, g := range r.Subscribe {
			fmt.Fprintf(&b, "| %s | subscribe | `%s` | %s |\n", r.Service, g.Subject, g.Why)
		}
		if r.Responds {
			fmt.Fprintf(&b, "| %s | reply | (reply subject of a request it received) | allow_responses: one reply per request |\n", r.Service)
		}
	}
	return b.String()
}

// ServerConfig renders the policy as nats-server configuration: the
// server's max_payload (MaxPayload) and two accounts (AccountPipeline and
// AccountCollectors), each user with its service's permissions, in its
// service's account; users maps a service name to the user name (services
// missing from it are left out). Each of hosts becomes a user of
// AccountCollectors with the permissions of HostRole (a user with a
// password, or an nkey user), beside the shared collector user if users
// names one. Passwords are referenced as $<USER>_PASSWORD environment
// variables of the server, never written out. An operator's user (the
// runtimetruth CLI) goes into AccountPipeline.
func ServerConfig(users map[string]string, hosts ...Host) (string, error) {
	seen := map[string]bool{}
	for _, u := range users {
		seen[u] = true
	}
	for _, h := range hosts {
		if err := h.Validate(); err != nil {
			return "", err
		}
		id := h.User + h.NKey
		if seen[id] {
			return "", fmt.Errorf("%w: host %q: user %q is named twice", ErrHost, h.Name, id)
		}
		seen[id] = true
	}
	var b strings.Builder
	b.WriteString("# runtimetruth bus policy (pkg/platform/buspolicy)\n")
	fmt.Fprintf(&b, "# events.MaxEventSize (%d) + events.MaxHeaderSize (%d)\n", events.MaxEventSize, events.MaxHeaderSize)
	fmt.Fprintf(&b, "max_payload: %d\n\naccounts {\n", MaxPayload)
	services := func(account string) []user {
		var out []user
		for _, r := range Roles() {
			if name, ok := users[r.Service]; ok && AccountOf(r.Service) == account {
				out = append(out, user{comment: r.Service, name: name, role: r})
			}
		}
		return out
	}

	fmt.Fprintf(&b, "  %s {\n    jetstream: enabled\n", AccountPipeline)
	writeUsers(&b, services(AccountPipeline))
	b.WriteString("    # the collectors' events, into the streams of this account (a service: the\n" +
		"    # publish acknowledgement goes back)\n    exports = [\n")
	for _, s := range CollectorSubjects() {
		fmt.Fprintf(&b, "      { service: %s, accounts: [%s] }\n", strconv.Quote(s), AccountCollectors)
	}
	b.WriteString("    ]\n    # collect-now requests to the collectors\n    imports = [\n")
	fmt.Fprintf(&b, "      { service: { account: %s, subject: %s } }\n", AccountCollectors, strconv.Quote(CollectNowSubject))
	b.WriteString("    ]\n  }\n")

	l := CollectorJetStream
	fmt.Fprintf(&b, "  %s {\n", AccountCollectors)
	b.WriteString("    # no JetStream storage: the account cannot create a stream (nor so a\n" +
		"    # consumer) that would take the server's storage from the pipeline; 0 counts\n" +
		"    # would mean no limit to nats-server\n")
	fmt.Fprintf(&b, "    jetstream { max_memory: %d, max_file: %d, max_streams: %d, max_consumers: %d }\n",
		l.MaxMemory, l.MaxStore, l.MaxStreams, l.MaxConsumers)
	collectors := services(AccountCollectors)
	for _, h := range hosts {
		collectors = append(collectors, user{comment: "collector of host " + strconv.Quote(h.Name), name: h.User, nkey: h.NKey, role: HostRole(h.Name)})
	}
	writeUsers(&b, collectors)
	b.WriteString("    exports = [\n")
	fmt.Fprintf(&b, "      { service: %s, accounts: [%s] }\n", strconv.Quote(CollectNowSubject), AccountPipeline)
	b.WriteString("    ]\n    imports = [\n")
	for _, s := range CollectorSubjects() {
		fmt.Fprintf(&b, "      { service: { account: %s, subject: %s } }\n", AccountPipeline, strconv.Quote(s))
	}
	b.WriteString("    ]\n  }\n}\n")
	return b.String(), nil
}

// user is one entry of an account's users: a user name (its password
// from the environment) or an nkey, with its role's permissions.
type user struct {
	comment    string
	name, nkey string
	role       Role
}

// PasswordEnv is the server's environment variable that ServerConfig
// reads a user's password from: $<USER>_PASSWORD, upper case, with '-'
// and '.' as '_'.
func PasswordEnv(user string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(user)) + "_PASSWORD"
}

// writeUsers renders the users block of an account.
func writeUsers(b *strings.Builder, users []user) {
	if len(users) == 0 {
		b.WriteString("    users = []\n")
		return
	}
	b.WriteString("    users = [\n")
	for _, u := range users {
		fmt.Fprintf(b, "      # %s\n      {\n", u.comment)
		if u.nkey != "" {
			fmt.Fprintf(b, "        nkey: %s\n", strconv.Quote(u.nkey))
		} else {
			fmt.Fprintf(b, "        user: %s\n        password: $%s\n", strconv.Quote(u.name), PasswordEnv(u.name))
		}
		b.WriteString("        permissions: {\n")
		fmt.Fprintf(b, "          publish: { allow: %s }\n", list(u.role.PublishSubjects()))
		fmt.Fprintf(b, "          subscribe: { allow: %s }\n", list(u.role.SubscribeSubjects()))
		if u.role.Responds {
			b.WriteString("          allow_responses: true\n")
		}
		b.WriteString("        }\n      }\n")
	}
	b.WriteString("    ]\n")
}

func list(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
