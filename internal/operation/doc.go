// Package operation is intentgate's core: what a write operation is, how it
// is keyed, which states it may pass through and what each state means to a
// caller. It is pure Go on purpose: no AWS, MCP or HTTP import, so the rules
// that keep a timeout from becoming a second write can be read and tested
// without any infrastructure.
//
// The one rule: a timeout ends the wait, not the operation. A missing
// response moves an operation to UNKNOWN, never to FAILED, and only a proof
// (a lookup that finds the effect, or an authoritative absence) moves it on.
package operation
