package remoting

// pullHandlers registers pulls, offsets and locks.
func (f *Frontend) pullHandlers() map[int32]handler { return nil }
