package broker_test

import (
	"math"
	"math/rand/v2"
	"os"
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
