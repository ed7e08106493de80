// Package console holds the console's browser tests: Debian's chromium,
// headless, driven through chromedp against a cluster of the real binaries
// (internal/proccluster), loading the NameServer's console on its admin
// listener. The tests are behind the browser build tag, so that make test
// needs no browser; run them with
//
//	make e2e-console
//
// which builds bin/ and runs go test -tags browser ./test/console/ with
// BOLIDE_REQUIRE_BROWSER=1 (no browser is then a failure, not a skip).
// The browser is chromium on PATH, or $BOLIDE_CHROMIUM.
//
// They check that each page loads with the cluster's real data, that a
// message sent with a key is found and shown, that a dead letter is
// replayed from the page and then consumed, that a topic created from the
// page exists through the SDK, and that the browser logged no error (console
// errors, exceptions, failed requests). They log two figures for
// docs/BENCHMARKS.md: the time from navigation to the topics and groups
// tables rendered with 500 topics and 200 groups, and what the console adds
// to an idle daemon's resident memory. BOLIDE_CONSOLE_SCREENSHOTS=<dir>
// (make console-screenshots) writes one PNG per page into dir.
package console
