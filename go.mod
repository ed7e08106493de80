module github.com/bolide-mq/bolide

go 1.26.8

require (
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
	golang.org/x/sys v0.50.0
)

require go.uber.org/multierr v1.10.0 // indirect
