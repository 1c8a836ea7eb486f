package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTimes is the CPU time (user + system) this process and its direct
// children (the local engines) have used so far: the campaign's cost in
// CPU seconds per operation, which, unlike its wall time, does not depend
// on how loaded the machine is. Children are read from /proc (Linux); on
// other systems only this process is counted.
func cpuTimes() (self, children time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := strconv.Itoa(os.Getpid())
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// Fields after the command name, which may hold spaces: "(comm)".
		s := string(raw)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// state ppid ... utime(14) stime(15), numbered from pid = 1.
		if len(fields) < 13 || fields[1] != me {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		children += time.Duration(utime+stime) * time.Second / clockTicks
	}
	return self, children
}

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat times.
const clockTicks = 100

func printCPU(ops int, wall time.Duration) {
	self, engines := cpuTimes()
	total := self + engines
	fmt.Printf("  %-44s %s (campaign process %s, engines %s)\n", "CPU time", total.Round(time.Second), self.Round(time.Second), engines.Round(time.Second))
	fmt.Printf("  %-44s %.3f\n", "CPU seconds per operation", total.Seconds()/float64(ops))
	fmt.Printf("  %-44s %.0f%% of 2 cores\n", "CPU used over the wall time", 100*total.Seconds()/wall.Seconds()/2)
}
