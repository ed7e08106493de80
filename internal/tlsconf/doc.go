// Package tlsconf supplies the server certificate of the ports that accept
// TLS (the broker's and the NameServer's, through internal/portmux).
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
package tlsconf
