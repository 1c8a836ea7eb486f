// Package obs is the project's observability surface: one structured audit
// record per call and per state transition (Auditor), CloudWatch metrics
// through the Embedded Metric Format (Metrics), and X-Ray tracing (Tracer).
//
// Everything writes to an io.Writer handed in by the caller (stdout under
// Lambda, where CloudWatch Logs picks the lines up), so nothing here opens a
// network connection except the X-Ray SDK when tracing is enabled.
//
// A nil *Auditor, *Metrics or *Tracer is a valid no-op, so packages and
// tests that do not care about observability need not build one.
package obs
