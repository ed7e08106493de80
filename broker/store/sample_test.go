package store

import "testing"

// TestVerifyPointAdvancesAtHighRate: when far more than maxSamples
// boundaries are dispatched between two checkpoints (the not-yet-durable
// stretch is longer than the sample ring), the checkpoint's verification
// point still advances to just below the durable end.
func TestVerifyPointAdvancesAtHighRate(t *testing.T) {
	s := &Store{opts: Options{RecoverWindow: 4 << 20}}
	const span = 8 * maxSamples * sampleEvery // dispatched per checkpoint
	var end int64
	for round := 1; round <= 5; round++ {
		for end < int64(round)*span {
			end += 1000
			s.sample(end)
		}
		durable := end - span/2 // the flush lags half a round behind
		got := s.verifyPoint(durable)
		lo := durable - s.opts.RecoverWindow - span/maxSamples*2
		if got > durable-s.opts.RecoverWindow || got < lo {
			t.Fatalf("round %d: verification point %d, want in [%d, %d] (durable end %d)",
				round, got, lo, durable-s.opts.RecoverWindow, durable)
		}
		if len(s.samples) > maxSamples {
			t.Fatalf("%d samples kept, at most %d", len(s.samples), maxSamples)
		}
	}
}
