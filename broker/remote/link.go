package remote

import (
	"context"
	"crypto/tls"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/bolide-mq/bolide/auth"
	"github.com/bolide-mq/bolide/internal/tlsconf"
)

// DialOptions secure the broker's connections to other daemons: the
// NameServers, the controllers, its master (metadata) and its slaves
// (metadata pushes). The zero value dials in plain text without
// credentials.
type DialOptions struct {
	// TLS, when set, is the connections' TLS configuration (transport
	// credentials); nil: plain text.
	TLS *tls.Config
	// Credentials, when set, sign every call: the signed-date header
	// (auth.NewHeader), fresh for each call, in the call's metadata.
	Credentials auth.Credentials
}

// NewDialOptions builds the broker's DialOptions from its TLS
// configuration (TLS only when c.Dial, through tlsconf.ClientConfig,
// presenting certs' certificate when a server asks for one; certs may be
// nil) and its credentials.
func NewDialOptions(c tlsconf.Config, certs *tlsconf.Source, creds auth.Credentials) (DialOptions, error) {
	d := DialOptions{Credentials: creds}
	if c.Dial {
		cfg, err := tlsconf.ClientConfig(c, certs)
		if err != nil {
			return DialOptions{}, err
		}
		d.TLS = cfg
	}
	return d, nil
}

// dialOptions is the first of opts, or the zero value.
func dialOptions(opts []DialOptions) DialOptions {
	if len(opts) > 0 {
		return opts[0]
	}
	return DialOptions{}
}

// GRPCOptions are the gRPC dial options d stands for (transport
// credentials, and per-call credentials when d has an access key), for a
// connection to another daemon opened elsewhere.
func (d DialOptions) GRPCOptions() []grpc.DialOption {
	tc := insecure.NewCredentials()
	if d.TLS != nil {
		tc = credentials.NewTLS(d.TLS)
	}
	out := []grpc.DialOption{grpc.WithTransportCredentials(tc)}
	if !d.Credentials.Empty() {
		out = append(out, grpc.WithPerRPCCredentials(signer{d.Credentials}))
	}
	return out
}

// signer signs every call with the broker's credentials.
type signer struct{ c auth.Credentials }

// GetRequestMetadata signs the call's date now.
func (s signer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	authorization, date := auth.NewHeader(s.c, time.Now())
	return map[string]string{auth.HeaderAuthorization: authorization, auth.HeaderDate: date}, nil
}

// RequireTransportSecurity is false: a daemon dialling in plain text
// (permissive mode, no --tls-dial) still authenticates. The header signs a
// date only; docs/security.md says to turn TLS on.
func (signer) RequireTransportSecurity() bool { return false }
