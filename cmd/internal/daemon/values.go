package daemon

import (
	"fmt"
	"net"
	"strconv"

	"github.com/spf13/pflag"
)

// checkedString is a string flag whose values must pass check. The check
// runs in Set, wherever the value comes from: pflag names the flag in its
// error, and Config.Load the environment variable or the file key, so a
// bad value is reported against its setting and source.
type checkedString struct {
	p     *string
	check func(string) error
}

func (c *checkedString) String() string { return *c.p }
func (c *checkedString) Type() string   { return "string" }

func (c *checkedString) Set(s string) error {
	if err := c.check(s); err != nil {
		return err
	}
	*c.p = s
	return nil
}

// CheckedStringVar defines a string flag like fs.StringVar whose values,
// from any source, must pass check. The default is not checked.
func CheckedStringVar(fs *pflag.FlagSet, p *string, name, value, usage string, check func(string) error) {
	*p = value
	fs.Var(&checkedString{p: p, check: check}, name, usage)
}

// CheckHostPort accepts host:port with a numeric port (0 picks one); the
// host may be empty (all interfaces).
func CheckHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("not host:port: %w", err)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("not host:port: port %q is not a number from 0 to 65535", port)
	}
	return nil
}

// CheckAdminListen accepts what --admin-listen takes: host:port, auto, off
// or "".
func CheckAdminListen(s string) error {
	switch s {
	case "", "off", AdminAuto:
		return nil
	}
	if err := CheckHostPort(s); err != nil {
		return fmt.Errorf("%w (or auto or off)", err)
	}
	return nil
}
