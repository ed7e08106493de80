package ha

import "testing"

func TestForkPoint(t *testing.T) {
	type E = EpochEntry
	cases := []struct {
		name string
		se   []E
		sEnd int64
		me   []E
		mEnd int64
		fork int64
		ok   bool
	}{
		{"same history, slave behind", []E{{1, 0}}, 100, []E{{1, 0}}, 300, 100, true},
		{"same history, slave ahead", []E{{1, 0}}, 300, []E{{1, 0}}, 100, 100, true},
		{"old master's unreplicated tail", []E{{1, 0}, {2, 100}}, 500, []E{{1, 0}, {2, 100}, {3, 400}}, 900, 400, true},
		{"slave missed an epoch", []E{{1, 0}}, 150, []E{{1, 0}, {3, 120}}, 900, 120, true},
		{"slave copied an entry beyond its end", []E{{1, 0}, {3, 120}}, 110, []E{{1, 0}, {3, 120}}, 900, 110, true},
		{"same epoch number, other start", []E{{1, 0}, {2, 100}}, 500, []E{{1, 0}, {2, 90}}, 900, 90, true},
		{"nothing shared", []E{{2, 0}}, 500, []E{{1, 0}}, 900, 0, false},
		{"empty slave list", nil, 0, []E{{1, 0}}, 900, 0, false},
		{"above 2 GiB", []E{{1, 0}, {2, 5 << 30}}, 9 << 30, []E{{1, 0}, {2, 5 << 30}, {3, 7 << 30}}, 12 << 30, 7 << 30, true},
	}
	for _, c := range cases {
		if err := ValidateEpochs(c.se); err != nil {
			t.Fatalf("%s: slave entries: %v", c.name, err)
		}
		if err := ValidateEpochs(c.me); err != nil {
			t.Fatalf("%s: master entries: %v", c.name, err)
		}
		fork, ok := ForkPoint(c.se, c.sEnd, c.me, c.mEnd)
		if fork != c.fork || ok != c.ok {
			t.Errorf("%s: ForkPoint = %d, %v; want %d, %v", c.name, fork, ok, c.fork, c.ok)
		}
	}
}

func TestValidateEpochs(t *testing.T) {
	bad := [][]EpochEntry{
		{{1, 0}, {1, 10}},
		{{2, 10}, {3, 5}},
		{{-1, 0}},
		{{1, -5}},
	}
	for _, b := range bad {
		if ValidateEpochs(b) == nil {
			t.Errorf("ValidateEpochs(%v) accepted", b)
		}
	}
	if err := ValidateEpochs([]EpochEntry{{1, 0}, {2, 0}, {5, 100}}); err != nil {
		t.Errorf("valid entries refused: %v", err)
	}
}
