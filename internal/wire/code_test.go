package wire

import (
	"errors"
	"testing"

	"github.com/bolide-mq/bolide/internal/errcode"
	pb "github.com/bolide-mq/bolide/proto/bolidev1"
)

// The core speaks errcode, the wire bolide.v1's Code: the two enums must
// hold the same numbers under the same names, both ways.
func TestCodesMatchTheWireEnum(t *testing.T) {
	for num, name := range pb.Code_name {
		if got := errcode.Code(num).String(); got != name {
			t.Errorf("wire code %d is %s, errcode calls it %s", num, name, got)
		}
	}
	for _, c := range errcode.Codes() {
		if name, ok := pb.Code_name[int32(c)]; !ok || name != c.String() {
			t.Errorf("errcode %d (%s) is %q on the wire", c, c, name)
		}
	}
}

func TestStatusRoundTrip(t *testing.T) {
	err := errcode.Errorf(errcode.TopicNotExist, "topic t does not exist")
	st := Status(err)
	if st.Code != pb.Code_TOPIC_NOT_EXIST || st.Message != err.Error() {
		t.Fatalf("status %v", st)
	}
	back := FromStatus(st)
	if !errors.Is(back, errcode.ErrTopicNotExist) || back.Error() != err.Error() {
		t.Fatalf("back %v", back)
	}
	if Status(errors.New("plain")).Code != pb.Code_SYSTEM_ERROR || FromStatus(OK) != nil {
		t.Fatal("plain error or OK mapped wrong")
	}
}
