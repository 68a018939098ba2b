package servicemain

import (
	"errors"
	"flag"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

// registerOverrides adds the NATS flags and --set to fs. The returned
// function, called after fs.Parse, gives the configuration overrides of
// the flags that were set: the --set values in order, then the NATS
// flags, which win over a --set of the same key.
func registerOverrides(fs *flag.FlagSet) func() map[string]any {
	var sets setFlag
	fs.Var(&sets, "set", "set the configuration `KEY=VALUE` (a key path such as nats.url or log.level) over the file "+
		"and the environment; repeatable")
	// The NATS flags set the keys of the service's nats section.
	named := map[string]*string{}
	keys := map[string]string{}
	for _, f := range natsbus.Flags {
		key := "nats." + f.Key
		named[f.Name] = fs.String(f.Name, "", f.Usage+" ("+key+")")
		keys[f.Name] = key
	}
	return func() map[string]any {
		out := map[string]any{}
		for _, kv := range sets {
			out[kv[0]] = kv[1]
		}
		fs.Visit(func(f *flag.Flag) {
			if key, ok := keys[f.Name]; ok {
				out[key] = *named[f.Name]
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
