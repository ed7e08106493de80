package broker

// RegistrationCounts is how many delta and whole-table registrations the
// broker sent.
func (b *Broker) RegistrationCounts() (deltas, wholes int64) {
	return b.reg.deltas.Load(), b.reg.wholes.Load()
}
