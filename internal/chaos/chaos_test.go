package chaos

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestChaos runs the failover scenarios against real processes:
// BOLIDE_CHAOS=short (CI: a few cycles each) or long (30 kill cycles, 20 s
// freezes, ...); skipped otherwise. BOLIDE_CHAOS_ONLY (a regexp) picks
// scenarios; BOLIDE_CHAOS_REPORT names a file the summary table is
// appended to.
func TestChaos(t *testing.T) {
	mode := Mode()
	if mode != "short" && mode != "long" {
		t.Skip("set BOLIDE_CHAOS=short or long to run the chaos scenarios")
	}
	var only *regexp.Regexp
	if s := os.Getenv("BOLIDE_CHAOS_ONLY"); s != "" {
		only = regexp.MustCompile(s)
	}
	var results []*Result
	for _, sc := range Scenarios(mode) {
		if only != nil && !only.MatchString(sc.Name) {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			r := Execute(t, sc)
			results = append(results, r)
			t.Log("\n" + Details(r))
			if r.Failed() {
				t.Errorf("%s: %s", sc.Name, strings.Join(append(append([]string{}, r.Errors...), r.Problems...), "; "))
			}
		})
	}
	sum := Summary(results)
	t.Logf("chaos %s summary:\n%s", mode, sum)
	if path := os.Getenv("BOLIDE_CHAOS_REPORT"); path != "" {
		var b strings.Builder
		b.WriteString(sum)
		for _, r := range results {
			b.WriteString("\n```\n" + Details(r) + "```\n")
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			_, err = f.WriteString(b.String())
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			t.Errorf("report: %v", err)
		}
	}
}
