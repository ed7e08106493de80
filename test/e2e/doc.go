// Package e2e is Bolide's end-to-end suite: it starts the real binaries with
// scripts/cluster-up.sh, as a user would, and drives the cluster through
// bin/bolide only, checking what the CLI prints. The tests are behind the
// e2e build tag; run them with
//
//	make e2e
//
// which builds bin/ and runs go test -tags e2e ./test/e2e/ with the cluster
// in a fresh temporary directory. BOLIDE_BIN (default ../../bin) names the
// binaries and BOLIDE_E2E_DIR the directory (default: a test temp dir).
package e2e
