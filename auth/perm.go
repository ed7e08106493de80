package auth

import (
	"fmt"
	"strings"
)

// Perm is a set of RocketMQ ACL permission bits, with RocketMQ's values
// (acl/common/Permission.java): an account's permission on a resource, or
// what a request needs.
type Perm uint8

// The permission bits.
const (
	Deny Perm = 1 // owned: nothing is allowed, whatever else is set
	Any  Perm = 2 // needed: publish or subscribe, either will do
	Pub  Perm = 4 // publish (send) to a topic
	Sub  Perm = 8 // subscribe: pull from a topic, consume as a group
)

// ParsePerm reads RocketMQ's words: DENY, PUB, SUB, PUB|SUB or SUB|PUB
// (any case, spaces ignored). Anything else is an error; RocketMQ reads it
// as DENY, which hides typos.
func ParsePerm(s string) (Perm, error) {
	switch strings.ToUpper(strings.ReplaceAll(s, " ", "")) {
	case "DENY":
		return Deny, nil
	case "PUB":
		return Pub, nil
	case "SUB":
		return Sub, nil
	case "PUB|SUB", "SUB|PUB":
		return Pub | Sub, nil
	}
	return 0, fmt.Errorf("auth: permission %q: want DENY, PUB, SUB or PUB|SUB", s)
}

// String is the permission in RocketMQ's words.
func (p Perm) String() string {
	switch {
	case p&Deny != 0:
		return "DENY"
	case p&(Pub|Sub) == Pub|Sub:
		return "PUB|SUB"
	case p&Pub != 0:
		return "PUB"
	case p&Sub != 0:
		return "SUB"
	case p&Any != 0:
		return "ANY"
	}
	return "DENY"
}

// permits reports whether owned grants needed: DENY grants nothing, ANY
// needs publish or subscribe, otherwise one needed bit must be owned.
func permits(needed, owned Perm) bool {
	if owned&Deny != 0 || owned == 0 {
		return false
	}
	if needed == Any {
		return owned&(Pub|Sub) != 0
	}
	return needed&owned != 0
}

// Kind is the kind of a resource.
type Kind uint8

// The resource kinds.
const (
	Topic Kind = iota + 1
	Group
)

func (k Kind) String() string {
	if k == Group {
		return "group"
	}
	return "topic"
}

// Need is one permission a request needs on one resource.
type Need struct {
	Kind Kind
	Name string
	Perm Perm
}

// retry and DLQ topic prefixes: their topics are the group's resources.
const (
	retryPrefix = "%RETRY%"
	dlqPrefix   = "%DLQ%"
)

// TopicNeed is perm on topic. A retry or dead-letter topic (%RETRY%g,
// %DLQ%g) belongs to its group: sending to or pulling from it needs
// subscribe on group g, as in RocketMQ.
func TopicNeed(topic string, perm Perm) Need {
	if g, ok := strings.CutPrefix(topic, retryPrefix); ok {
		return Need{Kind: Group, Name: g, Perm: Sub}
	}
	if g, ok := strings.CutPrefix(topic, dlqPrefix); ok {
		return Need{Kind: Group, Name: g, Perm: Sub}
	}
	return Need{Kind: Topic, Name: topic, Perm: perm}
}

// GroupNeed is perm on group (its %RETRY%/%DLQ% prefix removed).
func GroupNeed(group string, perm Perm) Need {
	return Need{Kind: Group, Name: groupName(group), Perm: perm}
}

func groupName(g string) string {
	if n, ok := strings.CutPrefix(g, retryPrefix); ok {
		return n
	}
	if n, ok := strings.CutPrefix(g, dlqPrefix); ok {
		return n
	}
	return g
}

func (n Need) String() string {
	verb := "use"
	switch {
	case n.Perm == Any:
		verb = "publish to or subscribe to"
	case n.Perm&Pub != 0 && n.Perm&Sub != 0:
		verb = "publish to and subscribe to"
	case n.Perm&Pub != 0:
		verb = "publish to"
	case n.Perm&Sub != 0:
		verb = "subscribe to"
	}
	if n.Kind == Group {
		if n.Perm&Sub != 0 && n.Perm&Pub == 0 {
			return "consume as group " + n.Name
		}
		return verb + " group " + n.Name
	}
	return verb + " topic " + n.Name
}
