// Package tlsconf is the daemons' TLS: the certificate their listeners
// present, the client certificates they ask for, the mode each listener
// applies, and the configuration they dial other daemons with.
//
// A Source either loads a certificate and key from PEM files or, when none
// are configured, serves a self-signed certificate made at start — as
// Apache RocketMQ's proxy does in its TLS test mode. The self-signed one
// (ECDSA P-256, valid ten years, names localhost, the host name and the
// loopback addresses) is made once per process and logged as such; clients
// must not verify it (RocketMQ 5's official clients do not by default).
//
// Configured files are watched without a goroutine: a handshake that comes
// at least CheckInterval after the last look stats both files, and when
// either changed (modification time, size or the file itself, as an atomic
// rename makes) the pair is loaded again. New connections get the new
// certificate; established ones keep theirs. A pair that does not load (a
// renewal caught half-written, say) is logged and the previous certificate
// stays in use until the files change again.
//
// Open builds the Source of a Config: with ClientAuth optional or require
// the server configuration asks for client certificates and verifies them
// (tls.VerifyClientCertIfGiven, tls.RequireAndVerifyClientCert) against the
// ClientCAFile bundle, which is reloaded on change the same way.
//
// The multiplexed client port applies the Mode through internal/portmux;
// a listener serving one protocol (HA, admin HTTP) applies it with Listen,
// which sorts each connection by its first byte, serves TLS, plain text or
// both, and closes the other kind (counted in RefusedCollector, logged at
// most once per RefuseLogInterval); ListenRefusing first answers a refused
// plain-text client in its protocol (the admin listener: HTTP 400, package
// plaintext).
//
// ClientConfig is the client side for a daemon's own connections (Dial):
// verified against CAFile when set, else not verified; the daemon's own
// certificate is presented when a server asks for one.
//
// Package tlstest makes a CA and certificates for tests.
package tlsconf
