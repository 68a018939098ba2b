package buspolicy

import (
	"fmt"
	"strconv"
	"strings"
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

// ServerConfig renders a nats-server authorization block giving each user
// its service's permissions; users maps a service name to the user name
// (services missing from it are left out). Passwords are referenced as
// $<USER>_PASSWORD environment variables of the server, never written out.
func ServerConfig(users map[string]string) string {
	var b strings.Builder
	b.WriteString("authorization {\n  users = [\n")
	for _, r := range Roles() {
		user, ok := users[r.Service]
		if !ok {
			continue
		}
		env := strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(user)) + "_PASSWORD"
		fmt.Fprintf(&b, "    # %s\n    {\n      user: %s\n      password: $%s\n      permissions: {\n", r.Service, strconv.Quote(user), env)
		fmt.Fprintf(&b, "        publish: { allow: %s }\n", list(r.PublishSubjects()))
		fmt.Fprintf(&b, "        subscribe: { allow: %s }\n", list(r.SubscribeSubjects()))
		if r.Responds {
			b.WriteString("        allow_responses: true\n")
		}
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

func list(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
