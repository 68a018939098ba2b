package natsbus

// Flag is the command-line form of one key of Config: the services take it
// as an override of their nats section, the CLI binds it to a Config.
type Flag struct {
	// Name is the flag's name, "nats-creds" say.
	Name string
	// Key is Config's key (its mapstructure path), "creds_file" say.
	Key string
	// Usage says what the flag takes (flag package style: the `NAME` in
	// back quotes is its argument).
	Usage string
	// Field is the Config field the flag sets.
	Field func(*Config) *string
}

// Flags are the connection flags every command on the bus takes, URL
// first.
var Flags = []Flag{
	{"nats", "url", "NATS server `URL`, or a comma-separated list of them", func(c *Config) *string { return &c.URL }},
	{"nats-creds", "creds_file", "NATS credentials `FILE`: user JWT and nkey seed", func(c *Config) *string { return &c.CredsFile }},
	{"nats-user", "user", "NATS user `NAME`, with --nats-password-file", func(c *Config) *string { return &c.User }},
	{"nats-password-file", "password_file", "`FILE` holding the NATS user's password", func(c *Config) *string { return &c.PasswordFile }},
	{"nats-tls-ca", "tls.ca_file", "CA certificate `FILE` (PEM) that verifies the NATS server", func(c *Config) *string { return &c.TLS.CAFile }},
	{"nats-tls-cert", "tls.cert_file", "client certificate `FILE` (PEM) for NATS, with --nats-tls-key", func(c *Config) *string { return &c.TLS.CertFile }},
	{"nats-tls-key", "tls.key_file", "key `FILE` (PEM) of --nats-tls-cert", func(c *Config) *string { return &c.TLS.KeyFile }},
}
