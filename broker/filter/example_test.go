package filter_test

import (
	"errors"
	"fmt"

	"github.com/bolide-mq/bolide/broker/filter"
)

func Example() {
	e, err := filter.Compile("region = 'eu' AND amount > 100 AND kind IN ('a','b')")
	if err != nil {
		panic(err)
	}
	props := map[string]string{"region": "eu", "amount": "250", "kind": "a", filter.TagsProperty: "paid"}
	fmt.Println(e.Evaluate(func(k string) (string, bool) { v, ok := props[k]; return v, ok }))

	_, err = filter.Compile("region = 'eu' AND amount >")
	var se *filter.SyntaxError
	if errors.As(err, &se) {
		fmt.Println(se.Offset, se.Msg)
	}
	// Output:
	// true
	// 26 expected a property, a literal, "(", NOT, "+" or "-", found end of expression
}
