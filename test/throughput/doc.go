// Package throughput measures what the safety boundary costs on the
// configured engine: the DynamoDB requests each path makes (a test that
// pins them, cited by docs/capacity.md) and, with -throughput (make
// bench-throughput), the write path's operations per second against the
// engine's own raw conditional-write rate measured in the same run.
package throughput
