//go:build !linux

package localengine

import "syscall"

// engineProcAttr puts the engine in its own process group (Stop kills the
// group). Outside Linux there is no parent-death signal: a crashed parent
// can leave the engine running.
func engineProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
