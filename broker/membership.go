package broker

// gossipAddr is the broker's memberlist address ("" while membership is off).
func (b *Broker) gossipAddr() string { return "" }
