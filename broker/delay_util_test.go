package broker

import (
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// shmTempDir is a temporary directory on tmpfs when /dev/shm exists (for
// virtual-clock runs, which pass a file of the timer index per bucket of
// 400 days; durability is not what they test), else t.TempDir().
func shmTempDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "bolide-broker-"); err == nil {
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

// logUniform draws a duration whose logarithm is uniform in [lo, hi].
func logUniform(r *rand.Rand, lo, hi time.Duration) time.Duration {
	l, h := math.Log(float64(lo)), math.Log(float64(hi))
	return time.Duration(math.Exp(l + r.Float64()*(h-l)))
}

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
		{map[string]string{"TIMER_DELAY_SEC": "3"}, now + 3000, true, false},
		{map[string]string{"TIMER_DELAY_SEC": "9223372036854775807"}, 0, false, true},
		{map[string]string{"TIMER_DELAY_MS": strconv.FormatInt(maxMS+1, 10)}, 0, false, true},
		{map[string]string{"TIMER_DELAY_MS": "-1"}, 0, false, true},
		{map[string]string{"TIMER_DELAY_MS": "soon"}, 0, false, true},
		{map[string]string{"TIMER_DELIVER_MS": "1900000001000", "TIMER_DELAY_MS": "99999"}, now + 1000, true, false},
	}
	for _, tc := range cases {
		due, ok, err := timerDue(tc.props, now, max)
		if (err != nil) != tc.bad || ok != tc.ok || due != tc.due {
			t.Errorf("%v: due %d ok %v err %v", tc.props, due, ok, err)
		}
	}
}
