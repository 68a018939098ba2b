package buspolicy

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// Markdown renders the roles as markdown: per service, a table of the
// allowed publish and subscribe subjects with the reason for each.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| service | may | subject | why |\n|---|---|---|---|\n")
	for _, r := range Roles() {
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
// missing from it are left out). Passwords are referenced as
// $<USER>_PASSWORD environment variables of the server, never written out.
// An operator's user (the runtimetruth CLI) goes into AccountPipeline.
func ServerConfig(users map[string]string) string {
	var b strings.Builder
	b.WriteString("# runtimetruth bus policy (pkg/platform/buspolicy)\n")
	fmt.Fprintf(&b, "# events.MaxEventSize (%d) + events.MaxHeaderSize (%d)\n", events.MaxEventSize, events.MaxHeaderSize)
	fmt.Fprintf(&b, "max_payload: %d\n\naccounts {\n", MaxPayload)
	services := func(account string) []Role {
		var out []Role
		for _, r := range Roles() {
			if _, ok := users[r.Service]; ok && AccountOf(r.Service) == account {
				out = append(out, r)
			}
		}
		return out
	}

	fmt.Fprintf(&b, "  %s {\n    jetstream: enabled\n", AccountPipeline)
	writeUsers(&b, users, services(AccountPipeline))
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
	writeUsers(&b, users, services(AccountCollectors))
	b.WriteString("    exports = [\n")
	fmt.Fprintf(&b, "      { service: %s, accounts: [%s] }\n", strconv.Quote(CollectNowSubject), AccountPipeline)
	b.WriteString("    ]\n    imports = [\n")
	for _, s := range CollectorSubjects() {
		fmt.Fprintf(&b, "      { service: { account: %s, subject: %s } }\n", AccountPipeline, strconv.Quote(s))
	}
	b.WriteString("    ]\n  }\n}\n")
	return b.String()
}

// writeUsers renders the users block of an account.
func writeUsers(b *strings.Builder, users map[string]string, roles []Role) {
	if len(roles) == 0 {
		b.WriteString("    users = []\n")
		return
	}
	b.WriteString("    users = [\n")
	for _, r := range roles {
		user := users[r.Service]
		env := strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(user)) + "_PASSWORD"
		fmt.Fprintf(b, "      # %s\n      {\n        user: %s\n        password: $%s\n        permissions: {\n", r.Service, strconv.Quote(user), env)
		fmt.Fprintf(b, "          publish: { allow: %s }\n", list(r.PublishSubjects()))
		fmt.Fprintf(b, "          subscribe: { allow: %s }\n", list(r.SubscribeSubjects()))
		if r.Responds {
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
