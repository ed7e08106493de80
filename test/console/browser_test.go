//go:build browser

package console

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bolide-mq/bolide/internal/proccluster"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// waitLimit bounds every wait for the page: a failure by timeout, not a
// timed assertion.
const waitLimit = 30 * time.Second

// chromiumPath finds the browser: $BOLIDE_CHROMIUM, else chromium on PATH.
// Without one the test is skipped, or fails when BOLIDE_REQUIRE_BROWSER=1
// (set by make e2e-console, so CI cannot pass without running it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("BOLIDE_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("BOLIDE_CHROMIUM: %v", err)
		}
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("BOLIDE_REQUIRE_BROWSER") == "1" {
		t.Fatal("no browser: install chromium (apt-get install -y chromium) or set BOLIDE_CHROMIUM")
	}
	t.Skip("no chromium on PATH and BOLIDE_CHROMIUM unset (BOLIDE_REQUIRE_BROWSER=1 makes this a failure)")
	return ""
}

// browser is one headless chromium tab and what it reported as a problem:
// console errors, uncaught exceptions, failed requests and answers >= 400.
type browser struct {
	t    *testing.T
	ctx  context.Context
	stop func()

	mu       sync.Mutex
	problems []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.WindowSize(1440, 900),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses to run as root with its sandbox
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{t: t}
	// The listener sees every event of the tab from its start; chromedp
	// enables the Runtime, Log and Network domains itself.
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.observe))
	b.ctx, b.stop = ctx, func() { cancel(); acancel() }
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		b.stop()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(b.stop)
	return b
}

func (b *browser) observe(ev any) {
	var p string
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				if a.Value != nil {
					args = append(args, string(a.Value))
				} else {
					args = append(args, a.Description)
				}
			}
			p = "console." + string(ev.Type) + ": " + strings.Join(args, " ")
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		p = "exception: " + d.Text
		if d.Exception != nil {
			p += " " + d.Exception.Description
		}
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError {
			p = "log: " + ev.Entry.Text + " " + ev.Entry.URL
		}
	case *network.EventLoadingFailed:
		// A request the browser cancelled (leaving the page while a poll was
		// in flight) is not a failure of the console.
		if !ev.Canceled {
			p = "request failed: " + ev.ErrorText
		}
	case *network.EventResponseReceived:
		if ev.Response.Status >= 400 {
			p = fmt.Sprintf("HTTP %d %s", ev.Response.Status, ev.Response.URL)
		}
	}
	if p != "" {
		b.mu.Lock()
		b.problems = append(b.problems, p)
		b.mu.Unlock()
	}
}

// checkClean fails the test for every problem the browser reported since
// the last call.
func (b *browser) checkClean(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	ps := b.problems
	b.problems = nil
	b.mu.Unlock()
	seen := map[string]int{}
	for _, p := range ps {
		if seen[p]++; seen[p] == 1 {
			t.Errorf("browser: %s", p)
		}
	}
	for p, n := range seen {
		if n > 1 {
			t.Logf("(%d times) %s", n, p)
		}
	}
}

// run runs chromedp actions, failing the test on error.
func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(t, what, err)
	}
}

func (b *browser) fail(t *testing.T, what string, err error) {
	t.Helper()
	banner, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('#banner')?.innerText || ''`))
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("not done in %v: %w", waitLimit, err)
	}
	t.Fatalf("%s: %v (banner: %q)", what, err, banner)
}

// wait waits until a JavaScript expression is truthy.
func (b *browser) wait(t *testing.T, what, expr string) {
	t.Helper()
	eval[chromedp.Void](t, b, expr, chromedp.Poll[chromedp.Void](expr,
		chromedp.WithPollingTimeout(waitLimit), chromedp.WithPollingInterval(50*time.Millisecond)))
}

// eval evaluates a JavaScript expression and decodes its value (with an
// action given, runs that instead). Right after a navigation the
// expression can meet the old document's execution context, gone: it is
// then evaluated again in the new one.
func eval[T any](t *testing.T, b *browser, expr string, action ...chromedp.Action[T]) T {
	t.Helper()
	a := chromedp.Evaluate[T](expr)
	if len(action) > 0 {
		a = action[0]
	}
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	for {
		v, err := chromedp.Run(ctx, a)
		if err != nil && strings.Contains(err.Error(), "Cannot find context with specified id") && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			b.fail(t, expr, err)
		}
		return v
	}
}

// text returns the visible text of the element sel (a CSS selector).
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	return eval[string](t, b, fmt.Sprintf(`document.querySelector(%q)?.innerText ?? ''`, sel))
}

// route changes the app's hash route (the document stays loaded) and waits
// until sel is in the page and its text contains every want.
func (b *browser) route(t *testing.T, hash, sel string, want ...string) string {
	t.Helper()
	b.run(t, "route "+hash, evalJS(fmt.Sprintf(`location.hash = %q`, hash)))
	return b.waitText(t, sel, want...)
}

// waitText waits until the element sel exists and its text contains every
// want, and returns the text.
func (b *browser) waitText(t *testing.T, sel string, want ...string) string {
	t.Helper()
	cond := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; const s = e.innerText;`, sel)
	for _, w := range want {
		cond += fmt.Sprintf(` if (!s.includes(%q)) return false;`, w)
	}
	cond += ` return true; })()`
	b.wait(t, fmt.Sprintf("%s shows %q", sel, want), cond)
	return b.text(t, sel)
}

// load navigates to url as a new document load.
func (b *browser) load(t *testing.T, url string) {
	t.Helper()
	b.run(t, "load "+url, chromedp.Navigate("about:blank"), chromedp.Navigate(url))
}

// click clicks the element sel.
func (b *browser) click(t *testing.T, sel string) {
	t.Helper()
	b.run(t, "click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// fill sets the value of the form field sel.
func (b *browser) fill(t *testing.T, sel, value string) {
	t.Helper()
	b.run(t, "fill "+sel, chromedp.SetValue(chromedp.CSS(sel), value))
}

// typeInto sets the value of the field sel and fires its input event, as
// typing does.
func (b *browser) typeInto(t *testing.T, sel, value string) {
	t.Helper()
	b.run(t, "type into "+sel, evalJS(fmt.Sprintf(
		`(e => { e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); })(document.querySelector(%q))`, value, sel)))
}

// screenshot writes the viewport as <name>.png into
// $BOLIDE_CONSOLE_SCREENSHOTS (relative to the repository root) when set.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("BOLIDE_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		root, err := proccluster.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, dir)
	}
	// Let the last poll's charts settle into the picture; a screenshot is
	// documentation, not a check.
	b.run(t, "settle", chromedp.Sleep(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(b.ctx, waitLimit)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.fail(t, "screenshot "+name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", filepath.Join(dir, name+".png"))
}

// evalJS is an action evaluating a JavaScript statement.
func evalJS(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](expr)
}
