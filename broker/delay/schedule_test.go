package delay

import (
	"strconv"
	"testing"
	"time"
)

func TestTimerDue(t *testing.T) {
	const now = int64(1_900_000_000_000)
	max := 400 * 24 * time.Hour
	maxMS := max.Milliseconds()
	cases := []struct {
		props map[string]string
		due   int64
		ok    bool
		bad   bool
	}{
		{map[string]string{}, 0, false, false},
		{map[string]string{"TIMER_DELIVER_MS": "1900000005000"}, now + 5000, true, false},
		{map[string]string{"TIMER_DELIVER_MS": "5"}, 5, true, false}, // past: at once
		{map[string]string{"TIMER_DELIVER_MS": strconv.FormatInt(now+maxMS, 10)}, now + maxMS, true, false},
		{map[string]string{"TIMER_DELIVER_MS": strconv.FormatInt(now+maxMS+1, 10)}, 0, false, true},
		{map[string]string{"TIMER_DELAY_MS": "250"}, now + 250, true, false},
		{map[string]string{"TIMER_DELAY_MS": "0"}, now, true, false},
		{map[string]string{"TIMER_DELAY_SEC": "3"}, now + 3000, true, false},
		{map[string]string{"TIMER_DELAY_SEC": "9223372036854775807"}, 0, false, true},
		{map[string]string{"TIMER_DELAY_MS": strconv.FormatInt(maxMS+1, 10)}, 0, false, true},
		{map[string]string{"TIMER_DELAY_MS": "-1"}, 0, false, true},
		{map[string]string{"TIMER_DELAY_MS": "soon"}, 0, false, true},
		{map[string]string{"TIMER_DELIVER_MS": "1900000001000", "TIMER_DELAY_MS": "99999"}, now + 1000, true, false},
	}
	for _, tc := range cases {
		due, ok, err := timerDue(func(k string) string { return tc.props[k] }, time.UnixMilli(now), max)
		if (err != nil) != tc.bad || ok != tc.ok || due != tc.due {
			t.Errorf("%v: due %d ok %v err %v", tc.props, due, ok, err)
		}
	}
}
