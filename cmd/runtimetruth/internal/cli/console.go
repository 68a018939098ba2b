package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/console"
	"github.com/runtimetruth/runtimetruth/pkg/platform/grafana"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
)

// consoleFlags are runtimetruth console's own flags.
type consoleFlags struct {
	listen     string
	oidc       console.OIDCConfig
	secretFile string
	tokensFile string
	auditJSONL string
	clickhouse string
	table      string
	dashboards string
}

func newConsoleCmd() *cobra.Command {
	var (
		bus busFlags
		f   consoleFlags
	)
	c := &cobra.Command{
		Use:   "console [--listen ADDR] [--oidc-issuer URL --oidc-client-id ID --oidc-client-secret-file FILE [--approver-group G]... [--api-tokens-file FILE]]",
		Short: "Serve the web console for a fleet's bus",
		Long: `Serve the web console (the pages runtimetruth up serves on loopback) over the
verifier's buckets of the NATS server --nats names, until interrupted.

With --oidc-issuer it serves on any address behind an OpenID Connect login
(authorization code with PKCE; the ID token's audience, signature and nonce
checked): --viewer-group names the groups (of the --groups-claim claim) that
may view (any signed-in user when none is named), --approver-group those
that may also approve baselines and keys and collect now (nobody when none
is named: approving is off). The approver recorded is the user's email, or
name, or subject. The client secret is read from --oidc-client-secret-file
or $RUNTIMETRUTH_OIDC_CLIENT_SECRET, never from a flag. Without OIDC it
serves on loopback only, behind a one-time launch token it prints, as up
does, and the user running it approves.

Its NATS credentials need to read the verifier's buckets and write only the
baselines and hosts buckets and baseline.changed events.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg := console.Config{Listen: f.listen, Approver: os.Getenv("USER")}
			if f.oidc.Issuer != "" {
				secret := os.Getenv("RUNTIMETRUTH_OIDC_CLIENT_SECRET")
				if f.secretFile != "" {
					raw, err := readFile(f.secretFile, 4096)
					if err != nil {
						return err
					}
					secret = strings.TrimSpace(string(raw))
				}
				if f.oidc.ClientID == "" || secret == "" {
					return errors.New("--oidc-issuer needs --oidc-client-id and a client secret (--oidc-client-secret-file or $RUNTIMETRUTH_OIDC_CLIENT_SECRET)")
				}
				f.oidc.ClientSecret = secret
				cfg.OIDC = &f.oidc
			}
			if f.tokensFile != "" {
				if cfg.OIDC == nil {
					return errors.New("--api-tokens-file needs --oidc-issuer")
				}
				raw, err := readFile(f.tokensFile, 1<<20)
				if err != nil {
					return err
				}
				if cfg.APITokens, err = console.ParseAPITokens(raw); err != nil {
					return fmt.Errorf("%s: %w", f.tokensFile, err)
				}
			}
			if f.auditJSONL != "" {
				cfg.Audit = &console.AuditLog{Path: f.auditJSONL}
			}
			if (f.clickhouse == "") != (f.dashboards == "") {
				return errors.New("the trends page needs both --clickhouse and --dashboards")
			}
			if f.clickhouse != "" {
				st, err := chstore.Open(c.Context(), chstore.Options{DSN: f.clickhouse, Table: f.table})
				if err != nil {
					return err
				}
				defer func() { _ = st.Close() }()
				ds, err := readDashboards(f.dashboards)
				if err != nil {
					return err
				}
				cfg.Trends = &console.Trends{Conn: st.Conn(), Database: st.Database(), Table: f.table, Dashboards: ds}
				if cfg.Audit == nil {
					cfg.Audit = &console.AuditLog{Store: st} // the audit page over the same table
				}
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			nc, js, err := bus.connect(ctx)
			if err != nil {
				return err
			}
			defer nc.Close()
			s, err := console.New(cfg, js, slog.New(slog.NewTextHandler(c.ErrOrStderr(), nil)))
			if err != nil {
				return err
			}
			if err := s.Start(ctx); err != nil {
				return err
			}
			_, _ = fmt.Fprintf(c.OutOrStdout(), "console: %s\n", s.URL())
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return s.Shutdown(sctx)
		},
	}
	bus.register(c)
	fl := c.Flags()
	fl.StringVar(&f.listen, "listen", "127.0.0.1:0", "serve on `ADDR` (a loopback address without OIDC; port 0 picks a free one)")
	fl.StringVar(&f.oidc.Issuer, "oidc-issuer", "", "the OpenID Connect provider's issuer `URL` (a login for every user)")
	fl.StringVar(&f.oidc.ClientID, "oidc-client-id", "", "the console's client `ID` at the provider")
	fl.StringVar(&f.secretFile, "oidc-client-secret-file", "", "`FILE` holding the client's secret")
	fl.StringVar(&f.oidc.RedirectURL, "oidc-redirect-url", "", "the callback `URL` as browsers reach it, <external URL>/auth/callback (default: the listening address's)")
	fl.StringVar(&f.oidc.GroupsClaim, "groups-claim", "groups", "the ID token's `CLAIM` listing the user's groups")
	fl.StringArrayVar(&f.oidc.ViewerGroups, "viewer-group", nil, "a `GROUP` that may view (repeatable; default: any signed-in user)")
	fl.StringArrayVar(&f.oidc.ApproverGroups, "approver-group", nil, "a `GROUP` that may approve and collect now (repeatable; default: nobody)")
	fl.StringVar(&f.auditJSONL, "audit-jsonl", "", "the auditor's JSONL audit log `PATH`, for the audit and integrity pages")
	fl.StringVar(&f.clickhouse, "clickhouse", os.Getenv("RUNTIMETRUTH_CONSOLE_CLICKHOUSE_DSN"), "the auditor's ClickHouse `DSN`, for the trends page (with --dashboards) and the audit and integrity pages (default $RUNTIMETRUTH_CONSOLE_CLICKHOUSE_DSN, which keeps a password out of the arguments)")
	fl.StringVar(&f.table, "clickhouse-table", chstore.DefaultTable, "the links `TABLE` in it")
	fl.StringVar(&f.dashboards, "dashboards", "", "the `DIR` of the Grafana dashboards (deploy/grafana) whose panels the trends page renders")
	fl.StringVar(&f.tokensFile, "api-tokens-file", "", "`FILE` of the API tokens accepted beside the logins (runtimetruth console token makes its lines)")
	c.AddCommand(newConsoleTokenCmd())
	return c
}

func newConsoleTokenCmd() *cobra.Command {
	var scope string
	c := &cobra.Command{
		Use:   "token NAME --scope viewer|approver",
		Short: "Make an API token for automation: the token once, and the line of --api-tokens-file that accepts it",
		Long: `Make an API token NAME with SCOPE (viewer: reads the pages; approver: also
approves and collects now, recorded as token:NAME). It prints the token,
once, on the first line (give it to the automation, which sends it as
"Authorization: Bearer <token>"), and on the second the line to add to the
console's --api-tokens-file, which holds only the token's SHA-256.`,
		Args: usageArgs(1, 1),
		RunE: func(c *cobra.Command, args []string) error {
			token, line, err := console.NewAPIToken(args[0], scope)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "%s\n%s\n", token, line)
			return err
		},
	}
	c.Flags().StringVar(&scope, "scope", console.ScopeViewer, "viewer or approver")
	return c
}

// readDashboards reads the Grafana dashboards (*.json) of dir, in name
// order.
func readDashboards(dir string) ([]grafana.Dashboard, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no dashboard (*.json) in %s", dir)
	}
	var out []grafana.Dashboard
	for _, f := range files {
		raw, err := readFile(f, 4<<20)
		if err != nil {
			return nil, err
		}
		d, err := grafana.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, d)
	}
	return out, nil
}
