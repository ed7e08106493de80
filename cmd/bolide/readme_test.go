package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/bolide-mq/bolide/internal/cluster"
)

// TestReadmeTranscript runs the commands of the README's quick start
// ("$ bin/bolide ...") on a one-broker cluster, as `make run` starts it,
// and checks that each prints the lines the README shows, up to ids,
// times, numbers, column widths and line order.
func TestReadmeTranscript(t *testing.T) {
	md, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	type step struct {
		args []string
		want []string
	}
	// The first code block with "$ bin/bolide" lines.
	var steps []*step
	inBlock := false
	for _, l := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(l, "```") {
			if inBlock && len(steps) > 0 {
				break
			}
			inBlock = !inBlock
			continue
		}
		switch {
		case !inBlock:
		case strings.HasPrefix(l, "$ bin/bolide "):
			steps = append(steps, &step{args: shellWords(t, strings.TrimPrefix(l, "$ bin/bolide "))})
		case strings.HasPrefix(l, "$ "):
			t.Fatalf("README transcript: %q is not a bolide command", l)
		case len(steps) > 0:
			s := steps[len(steps)-1]
			s.want = append(s.want, l)
		}
	}
	if len(steps) < 5 {
		t.Fatalf("only %d bolide commands in the README", len(steps))
	}
	c := cluster.Start(t, cluster.Options{})
	t.Cleanup(c.Stop)
	ns := strings.Join(c.NameServerAddrs(), ",")
	for _, s := range steps {
		code, out, errb := runCLI(t, "", append(s.args, "--namesrv", ns)...)
		if code != 0 {
			t.Fatalf("bolide %q: exit %d: %s", s.args, code, errb)
		}
		got, want := transcriptShape(out+errb), transcriptShape(strings.Join(s.want, "\n"))
		if !slices.Equal(got, want) {
			t.Errorf("bolide %q prints\n%s\nthe README shows\n%s", s.args, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

var (
	hexIDRE = regexp.MustCompile(`\b[0-9A-F]{32}\b`)
	// durationRE matches what time.Duration prints ("0s", "850µs", "12ms",
	// "1.204s", "1m2s"): a quick send can round to "0s" where the README
	// shows "5ms".
	durationRE = regexp.MustCompile(`\b(\d+(\.\d+)?(ns|µs|us|ms|h|m|s))+\b`)
	numberRE   = regexp.MustCompile(`\d+`)
)

// transcriptShape is the sorted lines of out with ids, durations, numbers
// and runs of spaces reduced to one form.
func transcriptShape(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = hexIDRE.ReplaceAllString(l, "ID")
		l = durationRE.ReplaceAllString(l, "DURATION")
		l = numberRE.ReplaceAllString(l, "0")
		if l = strings.Join(strings.Fields(l), " "); l != "" {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return lines
}

// shellWords splits a command line as a shell does words in single
// quotes and plain words (all the README uses).
func shellWords(t *testing.T, line string) []string {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
			}
			inWord = false
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestTranscriptShapeDurations checks that any duration matches any other
// and that plain numbers stay numbers.
func TestTranscriptShapeDurations(t *testing.T) {
	want := transcriptShape("sent 3 messages to orders in 8ms")
	for _, out := range []string{
		"sent 3 messages to orders in 0s",
		"sent 3 messages to orders in 850µs",
		"sent 3 messages to orders in 1.204s",
		"sent 12 messages to orders in 1m2.5s",
	} {
		if got := transcriptShape(out); !slices.Equal(got, want) {
			t.Errorf("transcriptShape(%q) = %q, want %q", out, got, want)
		}
	}
	if got := transcriptShape("sent 3 messages to orders in 8 ms"); slices.Equal(got, want) {
		t.Errorf("a number followed by a space became a duration: %q", got)
	}
}
