package message

import "fmt"

// PropertyEdit is one change to a message's properties: Name set to Value,
// or, with Remove, Name removed.
type PropertyEdit struct {
	Name, Value string
	Remove      bool
}

// AppendEditedProperties appends to dst the name\x01value\x02 pairs of
// pairs (in increasing name order, each name once, as a Packed entry holds
// them) with edits applied: a set pair replaces the pair of its name or is
// put in its place in the order, a removed name is left out. edits must be
// in strictly increasing name order. The result is in increasing name
// order too, so a record written with it is byte for byte the record
// encoded from the edited property map (EncodeUnsealed). It fails, leaving
// dst as it was, for a set pair that cannot be encoded or a result too
// large for a record.
func AppendEditedProperties(dst, pairs []byte, edits []PropertyEdit) ([]byte, error) {
	for i, e := range edits {
		if i > 0 && edits[i-1].Name >= e.Name {
			return dst, fmt.Errorf("%w: edit of %q out of order", ErrBadProperty, e.Name)
		}
		if !e.Remove && (e.Name == "" || e.Name == PropertyCRC32 || hasSeparator(e.Name) || hasSeparator(e.Value)) {
			return dst, fmt.Errorf("%w: %q cannot be set", ErrBadProperty, e.Name)
		}
	}
	start := len(dst)
	next := 0 // the first edit not yet applied
	// apply applies the edits of names up to name (all that are left,
	// last) and reports whether one of them was name's own.
	apply := func(name []byte, last bool) (own bool) {
		for next < len(edits) && (last || edits[next].Name <= string(name)) {
			e := edits[next]
			if !e.Remove {
				dst = appendPair(dst, e.Name, e.Value)
			}
			own = e.Name == string(name)
			next++
		}
		return own
	}
	if err := EachProperty(pairs, func(name, val []byte) error {
		if !apply(name, false) {
			dst = appendPair(dst, name, val)
		}
		return nil
	}); err != nil {
		return dst[:start], err
	}
	apply(nil, true)
	if n := len(dst) - start + crcReservedLen; n > MaxPropertiesSize {
		return dst[:start], fmt.Errorf("%w: properties take %d bytes, at most %d", ErrTooLarge, n, MaxPropertiesSize)
	}
	return dst, nil
}
