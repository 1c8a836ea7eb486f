//go:build linux

package rie

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/intentgate/intentgate/internal/localengine"
)

// The emulator version the tests run; infra/rie/install.sh pins the same.
const (
	emulatorModule  = "github.com/aws/aws-lambda-runtime-interface-emulator"
	emulatorPackage = emulatorModule + "/cmd/aws-lambda-rie"
	emulatorVersion = "v0.0.0-20261030222936-bef5c4ba774d"
)

// errProxyUnreachable: `go install` of the emulator could not download it.
// The only reason these tests skip.
var errProxyUnreachable = errors.New("module proxy unreachable")

// artifacts are the binaries every test of the package runs.
type artifacts struct {
	emulator   string // <repo>/.build/bin/aws-lambda-rie
	mcp        string // host-arch bootstrap of functions/mcp
	reconciler string // host-arch bootstrap of functions/reconciler
}

// prepare installs the emulator (once per checkout) and builds both
// bootstraps into dir, concurrently.
func prepare(ctx context.Context, dir string) (artifacts, error) {
	root, err := localengine.RepoRoot()
	if err != nil {
		return artifacts{}, err
	}
	a := artifacts{
		emulator:   filepath.Join(root, ".build", "bin", "aws-lambda-rie"),
		mcp:        filepath.Join(dir, "mcp", "bootstrap"),
		reconciler: filepath.Join(dir, "reconciler", "bootstrap"),
	}
	errc := make(chan error, 3)
	go func() { errc <- installEmulator(ctx, root, a.emulator) }()
	go func() { errc <- buildBootstrap(ctx, root, "./functions/mcp", a.mcp) }()
	go func() { errc <- buildBootstrap(ctx, root, "./functions/reconciler", a.reconciler) }()
	var errs []error
	for range 3 {
		errs = append(errs, <-errc)
	}
	return a, errors.Join(errs...)
}

// installEmulator runs `go install` unless bin already is the pinned version.
func installEmulator(ctx context.Context, root, bin string) error {
	if info, err := buildinfo.ReadFile(bin); err == nil && info.Main.Path == emulatorModule && info.Main.Version == emulatorVersion {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "install", emulatorPackage+"@"+emulatorVersion)
	cmd.Dir = root
	// GOFLAGS/GOWORK of the caller must not leak into an install of another module.
	cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(bin), "GOFLAGS=", "GOWORK=off", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	if proxyUnreachable(string(out)) {
		return fmt.Errorf("%w: go install %s@%s: %s", errProxyUnreachable, emulatorPackage, emulatorVersion, bytes.TrimSpace(out))
	}
	return fmt.Errorf("go install %s@%s: %w: %s", emulatorPackage, emulatorVersion, err, bytes.TrimSpace(out))
}

// proxyUnreachable recognises the download failures of `go install` that
// are network trouble rather than a broken module or toolchain.
func proxyUnreachable(out string) bool {
	for _, s := range []string{
		"dial tcp", "no such host", "connection refused", "network is unreachable",
		"i/o timeout", "TLS handshake timeout", "proxyconnect", "GOPROXY=off",
		"connection reset by peer", "temporary failure in name resolution",
	} {
		if strings.Contains(strings.ToLower(out), strings.ToLower(s)) {
			return true
		}
	}
	return false
}

// buildBootstrap builds a function for the host, as the emulator runs it
// locally; the arm64 deploy build is the Makefile's.
func buildBootstrap(ctx context.Context, root, pkg, out string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w: %s", pkg, err, bytes.TrimSpace(b))
	}
	return nil
}
