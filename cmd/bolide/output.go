package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"
)

// Timestamps are printed in RFC 3339 with milliseconds in UTC, in tables
// and in JSON alike ("2026-01-02T15:04:05.123Z"): Bolide stores times in
// milliseconds, and every time flag accepts this form back.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// formatTime renders t in timeLayout, or "-" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(timeLayout)
}

// jsonTime is formatTime for JSON: "" for the zero time.
func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// emitJSON writes v as one line of JSON (HTML characters unescaped).
func emitJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err := w.Write(buf.Bytes()) // Encode ends the line
	return err
}

// emit writes one JSON line on stdout.
func (a *app) emit(v any) error { return emitJSON(a.stdout, v) }

// table collects rows and prints them aligned.
type table struct {
	header []string
	rows   [][]string
	footer [][]string
}

func newTable(header ...string) *table { return &table{header: header} }

// row adds a row; values are formatted with fmt.Sprint.
func (t *table) row(vals ...any) {
	r := make([]string, len(vals))
	for i, v := range vals {
		r[i] = cell(v)
	}
	t.rows = append(t.rows, r)
}

// foot adds a row after a separator (totals).
func (t *table) foot(vals ...any) {
	r := make([]string, len(vals))
	for i, v := range vals {
		if v != "" {
			r[i] = cell(v)
		}
	}
	t.footer = append(t.footer, r)
}

func cell(v any) string {
	switch x := v.(type) {
	case string:
		if x == "" {
			return "-"
		}
		return x
	case time.Time:
		return formatTime(x)
	}
	return fmt.Sprint(v)
}

// write prints the table: a header, the rows, and the footer rows.
func (t *table) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(r []string) { fmt.Fprintln(tw, strings.Join(r, "\t")) }
	if t.header != nil {
		line(t.header)
	}
	for _, r := range t.rows {
		line(r)
	}
	for _, r := range t.footer {
		line(r)
	}
	return tw.Flush()
}

// humanBytes renders a byte count in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// displayBody renders a body on one table line: as it is when it is
// printable UTF-8 without line breaks, else Go-quoted; cut to max runes
// (0: no limit) with an ellipsis.
func displayBody(b []byte, max int) string {
	s := string(b)
	if !utf8.Valid(b) || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
		s = strconv.Quote(s)
	}
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-1]) + "…"
	}
	return s
}

// joinOrDash joins values with sep, or "-" when there are none.
func joinOrDash(vals []string, sep string) string {
	if len(vals) == 0 {
		return "-"
	}
	return strings.Join(vals, sep)
}

// age renders how long ago t was, rounded ("3s", "2m10s", "-" for zero).
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// unixMilli converts epoch milliseconds, 0 (unset) to the zero time.
func unixMilli(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
