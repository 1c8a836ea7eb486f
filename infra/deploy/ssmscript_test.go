package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTheSSMScriptWithoutCredentialsIsOneLine(t *testing.T) {
	python := scriptPython(t)
	cmd := exec.CommandContext(t.Context(), python, "-c", ssmScript, "us-east-1", "/ig/risk")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true"}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if assert.ErrorAs(t, err, &exit) {
		assert.Equal(t, 2, exit.ExitCode())
	}
	assert.NotContains(t, string(out), "Traceback")
}

func TestTheSSMScriptTakesAccessDeniedForUnchecked(t *testing.T) {
	python := scriptPython(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(400)
		_, _ = w.Write([]byte(`{"__type":"AccessDeniedException","message":"not authorized to perform: ssm:DescribeParameters"}`))
	}))
	defer srv.Close()
	cmd := exec.CommandContext(t.Context(), python, "-c", ssmScript, "us-east-1", "/ig/risk")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"AWS_ENDPOINT_URL=" + srv.URL, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_MAX_ATTEMPTS=1"}
	out, err := cmd.Output()
	assert.NoError(t, err)
	assert.Contains(t, string(out), `"unchecked"`)
}
