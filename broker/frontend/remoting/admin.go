package remoting

// adminHandlers registers what mqadmin sends.
func (f *Frontend) adminHandlers() map[int32]handler { return nil }
