package wire

import (
	"context"
	"testing"

	"github.com/bolide-mq/bolide/auth"
)

func TestMethodName(t *testing.T) {
	for full, want := range map[string]string{
		"/bolide.v1.Controller/Heartbeat": "Heartbeat",
		"Heartbeat":                       "Heartbeat",
		"/bolide.v1.NameServer/":          "",
	} {
		if got := MethodName(full); got != want {
			t.Errorf("MethodName(%q) = %q, want %q", full, got, want)
		}
	}
}

// With ACL off, a call between daemons and a read pass without
// credentials.
func TestAuthorizeCallACLOff(t *testing.T) {
	var g *auth.Guard // ACL off
	for _, c := range []CallClass{CallInternal, CallRead, 0} {
		if err := AuthorizeCall(context.Background(), g, c, "test"); err != nil {
			t.Errorf("class %d with ACL off: %v", c, err)
		}
	}
}
