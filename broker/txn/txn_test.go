package txn

import (
	"fmt"
	"testing"
	"time"
)

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{0, time.Second, 1}, {time.Second, 0, 1}, {time.Second, time.Second, -1}} {
		if o.Validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	d := DefaultOptions()
	if err := d.Validate(); err != nil || d.Timeout != 6*time.Second || d.CheckInterval != 30*time.Second || d.CheckMax != 15 {
		t.Fatalf("defaults %+v: %v", d, err)
	}
}

func TestOpBody(t *testing.T) {
	for _, offs := range [][]int64{{0}, {3, 17, 12345678901}} {
		if got := parseOpBody(opBody(offs)); fmt.Sprint(got) != fmt.Sprint(offs) {
			t.Errorf("%v → %q → %v", offs, opBody(offs), got)
		}
	}
	if got := parseOpBody([]byte("5,x,,6")); fmt.Sprint(got) != "[5 6]" {
		t.Errorf("lenient parse: %v", got)
	}
}
