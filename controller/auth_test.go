package controller

import (
	"testing"

	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// TestMethodClasses: every Controller method is classified, and the
// table names nothing else.
func TestMethodClasses(t *testing.T) {
	sd := pb.Controller_ServiceDesc
	seen := map[string]bool{}
	for _, m := range sd.Methods {
		seen["/"+sd.ServiceName+"/"+m.MethodName] = true
	}
	for _, s := range sd.Streams {
		seen["/"+sd.ServiceName+"/"+s.StreamName] = true
	}
	for m := range seen {
		if methodClasses[m] == 0 {
			t.Errorf("%s is not classified", m)
		}
	}
	for m := range methodClasses {
		if !seen[m] {
			t.Errorf("the table names %s, which is not served", m)
		}
	}
}
