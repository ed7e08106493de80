package offsets

// RemoveGroup forgets a group's offsets on every topic.
func (o *Table) RemoveGroup(group string) {
	o.mu.Lock()
	for k := range o.table {
		if _, g, ok := SplitKey(k); ok && g == group {
			delete(o.table, k)
			o.dirty = true
		}
	}
	o.mu.Unlock()
}
