package servicemain

import (
	"errors"
	"flag"
	"strings"
)

// natsFlags are the flags every service takes for its NATS connection,
// each the command-line form of one key of the service's nats section
// (natsbus.Config).
var natsFlags = []struct{ Name, Key, Usage string }{
	{"nats", "nats.url", "NATS server `URL`, or a comma-separated list of them (nats.url)"},
	{"nats-creds", "nats.creds_file", "NATS credentials `FILE`: user JWT and nkey seed (nats.creds_file)"},
	{"nats-user", "nats.user", "NATS user `NAME`, with --nats-password-file (nats.user)"},
	{"nats-password-file", "nats.password_file", "`FILE` holding the NATS user's password (nats.password_file)"},
	{"nats-tls-ca", "nats.tls.ca_file", "CA certificate `FILE` (PEM) that verifies the NATS server (nats.tls.ca_file)"},
	{"nats-tls-cert", "nats.tls.cert_file", "client certificate `FILE` (PEM) for NATS, with --nats-tls-key (nats.tls.cert_file)"},
	{"nats-tls-key", "nats.tls.key_file", "key `FILE` (PEM) of --nats-tls-cert (nats.tls.key_file)"},
}

// registerOverrides adds the NATS flags and --set to fs. The returned
// function, called after fs.Parse, gives the configuration overrides of
// the flags that were set: the --set values in order, then the NATS
// flags, which win over a --set of the same key.
func registerOverrides(fs *flag.FlagSet) func() map[string]any {
	var sets setFlag
	fs.Var(&sets, "set", "set the configuration `KEY=VALUE` (a key path such as nats.url or log.level) over the file "+
		"and the environment; repeatable")
	named := map[string]*string{}
	for _, f := range natsFlags {
		named[f.Name] = fs.String(f.Name, "", f.Usage)
	}
	return func() map[string]any {
		out := map[string]any{}
		for _, kv := range sets {
			out[kv[0]] = kv[1]
		}
		fs.Visit(func(f *flag.Flag) {
			for _, nf := range natsFlags {
				if nf.Name == f.Name {
					out[nf.Key] = *named[f.Name]
				}
			}
		})
		return out
	}
}

// setFlag collects --set KEY=VALUE.
type setFlag [][2]string

func (s *setFlag) String() string { return "" }

func (s *setFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	k = strings.ToLower(strings.TrimSpace(k))
	if !ok || k == "" {
		return errors.New("want KEY=VALUE, e.g. nats.url=nats://nats:4222")
	}
	*s = append(*s, [2]string{k, val})
	return nil
}
