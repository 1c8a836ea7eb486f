// Package rie tests the real Lambda binaries (functions/mcp and
// functions/reconciler) under the AWS Lambda Runtime Interface Emulator:
// each is built for the host as a bootstrap, started by the emulator on
// loopback ports chosen at run time, and invoked with the sample events of
// /events against a local engine, the token issuer and the simulators.
//
// The emulator is installed once into <repo>/.build/bin (infra/rie/install.sh
// does the same by hand); the tests skip only when that install cannot reach
// the module proxy.
package rie
