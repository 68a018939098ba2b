package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/logtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

var screenshots = flag.String("screenshots", "", "write the browser tests' page screenshots into this `DIR` (the README's are docs/console)")

// upRun is a `runtimetruth up` of the test: its console's launch URL and
// origin, its NATS URL, the git repository and the Python environment it
// watches (pip's __init__.py in it), its data directory.
type upRun struct {
	launch, origin, nats, repo, data string
	venv, pipInit                    string
}

// startUp runs `runtimetruth up --approve` in a new git repository (its
// first snapshot approved as the baseline), as the user "reviewer".
func startUp(t *testing.T) upRun {
	t.Helper()
	repo := t.TempDir()
	git(t, repo, "init", "-q", "-b", "main")
	git(t, repo, "commit", "-q", "--allow-empty", "-m", "one")
	t.Chdir(repo)
	// A real virtual environment (ensurepip's pip in it): up checks the
	// integrity of its installed code.
	venv := filepath.Join(t.TempDir(), "venv")
	made, err := exec.Command("python3", "-m", "venv", venv).CombinedOutput()
	require.NoError(t, err, "python3 -m venv (make deps installs python3-venv): %s", made)
	pipInit, err := filepath.Glob(filepath.Join(venv, "lib", "python3*", "site-packages", "pip", "__init__.py"))
	require.NoError(t, err)
	require.Len(t, pipInit, 1)
	t.Setenv("VIRTUAL_ENV", venv)
	t.Setenv("USER", "reviewer")
	data := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb logtest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, "test",
			[]string{"up", "--data-dir", data, "--interval", "1s", "--no-codex", "--approve"})
	}()
	t.Cleanup(func() {
		cancel()
		assert.Equal(t, 0, <-done, out.String()+errb.String())
	})
	consoleLine := regexp.MustCompile(`(?m)^console: (http://127\.0\.0\.1:\d+)(/\?token=\S+)$`)
	natsLine := regexp.MustCompile(`(?m)^runtimetruth up: NATS (\S+), data`)
	u := upRun{repo: repo, data: data, venv: venv, pipInit: pipInit[0]}
	natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		c, n := consoleLine.FindStringSubmatch(out.String()), natsLine.FindStringSubmatch(out.String())
		if c == nil || n == nil {
			return fmt.Errorf("no console and NATS lines yet:\n%s%s", out.String(), errb.String())
		}
		u.origin, u.launch, u.nats = c[1], c[1]+c[2], n[1]
		return nil
	})
	return u
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
}

// tab is a Chromium tab.
type tab struct {
	ctx context.Context
}

// browser starts Debian's chromium (make test installs it) headless; the
// name rebound.example resolves to 127.0.0.1 in it, as a DNS rebinding
// attacker would make it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	require.NoError(t, err, "Debian's chromium: make deps installs it (scripts/install-browser.sh)")
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("host-resolver-rules", "MAP rebound.example 127.0.0.1"),
		// One process for a page and its frames, so that the page's frame
		// tree shows what became of a frame of another site.
		chromedp.Flag("disable-site-isolation-trials", true), chromedp.Flag("disable-features", "IsolateOrigins,site-per-process"))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	return alloc
}

// newTab opens a tab in a new browser of alloc (its own cookies).
func newTab(alloc context.Context, t *testing.T) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	tb := &tab{ctx: ctx}
	require.NoError(t, chromedp.Do(ctx)) // starts the browser, with no timeout
	_, err := chromedp.Call(ctx, network.Enable, network.EnableParams{})
	require.NoError(t, err)
	return tb
}

// bounded is the tab's context for one step.
func (tb *tab) bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(tb.ctx, 90*time.Second)
}

func (tb *tab) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := tb.bounded()
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, actions...))
}

// open navigates to u and returns the document's status.
func (tb *tab) open(t *testing.T, u string) int64 {
	t.Helper()
	ctx, cancel := tb.bounded()
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(u))
	require.NoError(t, err)
	return resp.Status
}

// click clicks sel and returns the status of the document it loads.
func (tb *tab) click(t *testing.T, sel string) int64 {
	t.Helper()
	ctx, cancel := tb.bounded()
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	require.NoError(t, err)
	return resp.Status
}

func evaluate[T any](t *testing.T, tb *tab, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	ctx, cancel := tb.bounded()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	require.NoError(t, err)
	return v
}

func (tb *tab) value(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := tb.bounded()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(sel)))
	require.NoError(t, err)
	return v
}

// text is the page's visible text.
func (tb *tab) text(t *testing.T) string {
	t.Helper()
	return evaluate[string](t, tb, `document.body ? document.body.innerText : ""`)
}

// until reloads the page until expr is true.
func (tb *tab) until(t *testing.T, expr string) {
	t.Helper()
	natstest.CheckFor(t, 90*time.Second, 500*time.Millisecond, func() error {
		tb.do(t, chromedp.Reload())
		if !evaluate[bool](t, tb, expr) {
			return fmt.Errorf("not yet: %s", expr)
		}
		return nil
	})
}

// shot writes the page's screenshot (the whole page) as name.png into
// -screenshots.
func (tb *tab) shot(t *testing.T, name string) { tb.capture(t, name, chromedp.FullScreenshot(100)) }

// shotTop writes the window's screenshot (the top of a long page).
func (tb *tab) shotTop(t *testing.T, name string) { tb.capture(t, name, chromedp.CaptureScreenshot()) }

func (tb *tab) capture(t *testing.T, name string, take chromedp.Action[[]byte]) {
	t.Helper()
	dir := *screenshots
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := tb.bounded()
	defer cancel()
	png, err := chromedp.Run(ctx, take)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// axeResult is what axe.run resolves to, in part.
type axeResult struct {
	Violations []struct {
		ID, Impact, Help string
		Nodes            []struct {
			HTML string `json:"html"`
		}
	}
}

// accessible runs axe-core in the page and fails on a serious or
// critical violation.
func (tb *tab) accessible(t *testing.T, page string) {
	t.Helper()
	path := os.Getenv("RUNTIMETRUTH_AXE")
	if path == "" {
		home, _ := os.UserHomeDir()
		path = filepath.Join(home, ".cache", "runtimetruth", "axe-core-4.14.1", "node_modules", "axe-core", "axe.min.js")
	}
	src, err := os.ReadFile(path)
	require.NoError(t, err, "axe-core: make deps installs it (scripts/install-browser.sh)")
	evaluate[chromedp.Void](t, tb, string(src)+";0")
	res := evaluate[axeResult](t, tb, `axe.run(document, {resultTypes: ["violations"]})`, chromedp.EvalAwaitPromise)
	for _, v := range res.Violations {
		if v.Impact == "serious" || v.Impact == "critical" {
			var nodes []string
			for _, n := range v.Nodes {
				nodes = append(nodes, n.HTML)
			}
			t.Errorf("%s page: %s (%s): %s: %s", page, v.ID, v.Impact, v.Help, strings.Join(nodes, " | "))
		}
	}
}

// baselineLinks are the baseline.changed links of up's audit log.
func baselineLinks(t *testing.T, data string) []events.BaselineChanged {
	t.Helper()
	f, err := os.Open(filepath.Join(data, "auditor", "audit.jsonl"))
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	var out []events.BaselineChanged
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		r, err := link.Parse(sc.Bytes())
		require.NoError(t, err)
		if r.Meta.Type != events.TypeBaselineChanged {
			continue
		}
		var ev struct {
			Data events.BaselineChanged `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.Event, &ev))
		out = append(out, ev.Data)
	}
	require.NoError(t, sc.Err())
	return out
}

const gitRow = `tr[data-key$="kind=git.repository"]`

// The console in Chromium against `runtimetruth up`: drift caused on disk
// appears in the open fleet page without a reload; the target's page
// approves exactly the digest it shows (the baseline bucket and the audit
// chain read directly); a snapshot changed after the page was rendered is
// refused (409) and nothing changes; a cross-site form (403), a
// rebinding Host (421), no session (401), the launch token's second use
// (401) and framing (CSP frame-ancestors) are each refused with the
// baseline unchanged. Each page passes axe-core (no serious or critical
// violation) and is photographed.
func TestConsoleInBrowser(t *testing.T) {
	u := startUp(t)
	_, js := natstest.Connect(t, u.nats)
	var err error
	var b *verifier.Baseline
	target := events.Target{Kind: "git.repository", Identifier: u.repo}
	baselines := verifier.NewBaselines(js, "")
	baseline := func() string {
		t.Helper()
		b, err = baselines.Get(t.Context(), target)
		require.NoError(t, err)
		return b.Digest
	}
	alloc := browser(t)
	me := newTab(alloc, t)

	// The launch token opens the session; up approved the first
	// snapshot, so the repository passes.
	require.Equal(t, int64(http.StatusOK), me.open(t, u.launch))
	me.until(t, `(document.querySelector('`+gitRow+` .status .badge') || {}).textContent === "PASS"`)
	first := baseline()

	// Drift on disk shows in the open page, which is not reloaded.
	evaluate[chromedp.Void](t, me, `window.rtOpened = 1`)
	require.NoError(t, os.WriteFile(filepath.Join(u.repo, "new.txt"), []byte("x"), 0o600))
	me.do(t, chromedp.Poll[chromedp.Void](`document.querySelector('`+gitRow+` .status .badge').textContent === "DRIFT"`,
		chromedp.WithPollingTimeout(60*time.Second)))
	assert.True(t, evaluate[bool](t, me, `window.rtOpened === 1`), "updated in place, not reloaded")
	me.shot(t, "fleet")
	me.accessible(t, "fleet")

	// The target's page approves the digest it shows.
	require.Equal(t, int64(http.StatusOK), me.click(t, gitRow+` td a`))
	shown := me.value(t, `form.approve input[name="digest"]`)
	me.shot(t, "target")
	me.accessible(t, "target")
	assert.Equal(t, int64(http.StatusOK), me.click(t, `form.approve button`))
	assert.Contains(t, me.text(t), "Approved: "+shown)
	assert.Equal(t, shown, baseline(), "exactly the digest shown")
	b, err = baselines.Get(t.Context(), target)
	require.NoError(t, err)
	assert.Equal(t, "reviewer", b.ApprovedBy)
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		for _, c := range baselineLinks(t, u.data) {
			if c.Digest == shown && c.PreviousDigest == first && c.Actor == "reviewer" {
				return nil
			}
		}
		return fmt.Errorf("no baseline.changed link of %s by reviewer yet", shown)
	})

	// Committed: a new drift, shown; committed again after the page was
	// rendered (the page says so, live): approving the snapshot shown is
	// refused, and the baseline stays.
	git(t, u.repo, "add", "-A")
	git(t, u.repo, "commit", "-q", "-m", "two")
	me.until(t, `(document.querySelector('form.approve input[name="digest"]') || {value: "`+shown+`"}).value !== "`+shown+`"`)
	stale := me.value(t, `form.approve input[name="digest"]`)
	git(t, u.repo, "commit", "-q", "--allow-empty", "-m", "three")
	head, err := exec.Command("git", "-C", u.repo, "rev-parse", "HEAD").Output()
	require.NoError(t, err)
	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		obs, err := baselines.Observations(t.Context(), target)
		if err != nil {
			return err
		}
		for _, o := range obs {
			if strings.Contains(string(o.Snapshot), strings.TrimSpace(string(head))) {
				return nil
			}
		}
		return fmt.Errorf("the verifier has no snapshot of commit three yet")
	})
	me.do(t, chromedp.WaitVisible(chromedp.ID("live-news")))
	assert.Contains(t, me.text(t), "reload to review it")
	assert.Equal(t, int64(http.StatusConflict), me.click(t, `form.approve button`))
	assert.Contains(t, me.text(t), stale)
	assert.Equal(t, shown, baseline(), "nothing adopted")
	me.do(t, chromedp.NavigateBack())

	// Collect now: the host's signed reply, checked against its enrolled
	// key.
	assert.Equal(t, int64(http.StatusOK), me.click(t, `form.collect button`))
	text := me.text(t)
	assert.Contains(t, text, "by its enrolled key ed25519:")
	assert.Regexp(t, `collected\s+\S+\s+git\s+sha256:[0-9a-f]{64} event`, text)

	// The audit chain and the integrity history.
	require.Equal(t, int64(http.StatusOK), me.open(t, u.origin+"/audit"))
	assert.Contains(t, me.text(t), "INTACT")
	assert.Contains(t, me.text(t), "/console/reviewer")
	me.shot(t, "audit")
	me.accessible(t, "audit")
	// Installed code changed: the integrity history shows it, with the file.
	f, err := os.OpenFile(u.pipInit, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("\n# changed\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, int64(http.StatusOK), me.open(t, u.origin+"/integrity"))
	me.until(t, `document.body.innerText.includes("pip/__init__.py")`)
	assert.Contains(t, me.text(t), "modified pip")
	me.shot(t, "integrity")
	me.accessible(t, "integrity")

	// Refusals, each with the baseline unchanged.
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		switch r.URL.Path {
		case "/form":
			_, _ = fmt.Fprintf(w, `<form method="post" action="%s/approve"><input name="host" value="%s"><input name="kind" value="%s">`+
				`<input name="id" value="%s"><input name="digest" value="%s"></form><script>document.forms[0].submit()</script>`,
				u.origin, r.URL.Query().Get("host"), target.Kind, target.Identifier, r.URL.Query().Get("digest"))
		case "/frame":
			_, _ = fmt.Fprintf(w, `<iframe src="%s/"></iframe>`, u.origin)
		}
	}))
	t.Cleanup(attacker.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(attacker.URL, "http://"))
	evil := "http://localhost:" + port // another site than 127.0.0.1
	require.Equal(t, int64(http.StatusOK), me.open(t, u.origin+"/?kind=git.repository"))
	latest := evaluate[string](t, me, `document.querySelector('`+gitRow+` .digest code').title`)
	key := evaluate[string](t, me, `document.querySelector('`+gitRow+`').getAttribute("data-key")`)
	kv, err := url.ParseQuery(strings.TrimPrefix(key, "/target?"))
	require.NoError(t, err)

	// A cross-site form, in the session's browser, posting the latest
	// digest.
	responses := chromedp.Events(me.ctx, network.ResponseReceived)
	require.Equal(t, int64(http.StatusOK), me.open(t, evil+"/form?"+url.Values{"host": {kv.Get("host")}, "digest": {latest}}.Encode()))
	for ev, err := range responses {
		require.NoError(t, err)
		if ev.Type == network.ResourceTypeDocument && ev.Response.URL == u.origin+"/approve" {
			assert.Equal(t, int64(http.StatusForbidden), ev.Response.Status)
			break
		}
	}
	assert.Equal(t, shown, baseline(), "a cross-site form adopts nothing")

	// Framing: the console refuses to be framed (frame-ancestors 'none').
	require.Equal(t, int64(http.StatusOK), me.open(t, evil+"/frame"))
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := me.bounded()
		defer cancel()
		res, err := chromedp.Call(ctx, page.GetFrameTree, cdp.Empty{})
		if err != nil {
			return err
		}
		if len(res.FrameTree.ChildFrames) != 1 {
			return fmt.Errorf("%d frames", len(res.FrameTree.ChildFrames))
		}
		// Refused: an error page in place of the console.
		if f := res.FrameTree.ChildFrames[0].Frame; !strings.HasPrefix(f.URL, "chrome-error:") || f.UnreachableURL != u.origin+"/" {
			return fmt.Errorf("the frame holds %s (unreachable %q), not the error page of a refused frame", f.URL, f.UnreachableURL)
		}
		return nil
	})

	// A rebinding Host, in the session's browser.
	_, consolePort, _ := net.SplitHostPort(strings.TrimPrefix(u.origin, "http://"))
	assert.Equal(t, int64(http.StatusMisdirectedRequest), me.open(t, "http://rebound.example:"+consolePort+"/"))

	// Another browser: no session, and the launch token spent.
	other := newTab(alloc, t)
	assert.Equal(t, int64(http.StatusUnauthorized), other.open(t, u.origin+"/"))
	assert.Equal(t, int64(http.StatusUnauthorized), other.open(t, u.launch))
	assert.Equal(t, shown, baseline())
}
