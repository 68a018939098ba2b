// Package config loads a service's configuration from defaults, an optional
// file, RUNTIMETRUTH_<SERVICE>_ environment variables and explicit
// overrides, decoding strictly: an unknown key is an error naming the key.
package config

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
)

// Validator is implemented by configurations that check themselves.
type Validator interface {
	Validate() error
}

// Load fills dst (a pointer to a struct with mapstructure tags, already
// holding the defaults) from the file at path (YAML, TOML or JSON by
// extension; empty for none), then environment variables named
// envPrefix + "_" + the upper-cased key path with "." replaced by "_"
// (RUNTIMETRUTH_VERIFIER_NATS_URL for nats.url), then overrides (key path →
// value, as from flags). Unknown keys in the file are an error. When dst
// implements Validator it is validated.
func Load(path, envPrefix string, dst any, overrides map[string]any) error {
	v := viper.New()
	defaults := map[string]any{}
	if err := mapstructure.Decode(dst, &defaults); err != nil {
		return fmt.Errorf("config defaults: %w", err)
	}
	for _, k := range flatten("", defaults) {
		v.SetDefault(k.path, k.value)
	}
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("config file: %w", err)
		}
		v.SetConfigFile(path)
		if err := v.ReadInConfig(); err != nil {
			return fmt.Errorf("read config %s: %w", path, err)
		}
	}
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	for k, val := range overrides {
		v.Set(k, val)
	}
	err := v.UnmarshalExact(dst, func(c *mapstructure.DecoderConfig) {
		c.DecodeHook = mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			mapstructure.StringToSliceHookFunc(","),
		)
	})
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if val, ok := dst.(Validator); ok {
		if err := val.Validate(); err != nil {
			return fmt.Errorf("invalid config: %w", err)
		}
	}
	return nil
}

type kv struct {
	path  string
	value any
}

// flatten lists the leaf key paths of a nested map, so every key gets a
// default and can be overridden from the environment (viper only binds
// environment variables for keys it knows).
func flatten(prefix string, m map[string]any) []kv {
	var out []kv
	for k, val := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if sub, ok := val.(map[string]any); ok && len(sub) > 0 {
			out = append(out, flatten(p, sub)...)
			continue
		}
		out = append(out, kv{path: p, value: val})
	}
	return out
}

// ErrInvalid is wrapped by Validate implementations for bad values.
var ErrInvalid = errors.New("invalid configuration")

// Invalidf returns an error wrapping ErrInvalid that says, as
// fmt.Sprintf(format, args...) formats it, which value is wrong and why
// ("replicas: 7 (want 1 to 5)").
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
