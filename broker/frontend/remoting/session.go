package remoting

// sessionState is the client session of a connection (heartbeats, check-backs).
type sessionState struct{}

// closed ends what a connection left behind.
func (f *Frontend) closed(cs *connState) {}

// sendHandlers registers heartbeats and the producer side.
func (f *Frontend) sendHandlers() map[int32]handler { return nil }
