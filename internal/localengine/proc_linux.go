package localengine

import "syscall"

// engineProcAttr puts the engine in its own process group (Stop kills the
// group) and has the kernel kill it if its parent dies first, so a
// crashed parent never leaves an engine behind.
func engineProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
