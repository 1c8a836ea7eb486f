package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// secureStringParameters are the answers naming SSM SecureStrings the
// functions read decrypted at cold start.
var secureStringParameters = []string{"RiskApiKeyParameterName", "ReleaseApiKeyParameterName", "TaskIdKeyParameterName"}

// awsManagedSSMKey is the KMS key SSM encrypts SecureStrings with unless
// told otherwise; the functions need no grant for it.
const awsManagedSSMKey = "alias/aws/ssm"

// ssmParameter is a parameter's metadata (never its value).
type ssmParameter struct {
	Type  string `json:"type"`
	KeyID string `json:"key_id"`
}

// ssmFacts answers ssmScript: the parameters found, by name (missing ones
// are absent), or why they could not be read.
type ssmFacts struct {
	Parameters map[string]ssmParameter `json:"parameters"`
	Unchecked  string                  `json:"unchecked"`
}

const ssmScript = awsErrors + `
import boto3, json
region, names = sys.argv[1], sys.argv[2:]
ssm = boto3.client("ssm", region_name=region)
found = {}
try:
    # Every page: DescribeParameters may answer a page without the match
    # and a NextToken.
    pages = ssm.get_paginator("describe_parameters")
    for name in names:
        for page in pages.paginate(ParameterFilters=[{"Key": "Name", "Option": "Equals", "Values": [name]}]):
            for p in page["Parameters"]:
                found[p["Name"]] = {"type": p["Type"], "key_id": p.get("KeyId", "")}
except ClientError as e:
    err = e.response.get("Error", {})
    if "AccessDenied" in err.get("Code", ""):
        print(json.dumps({"unchecked": "%s: %s" % (err.get("Code"), err.get("Message"))}))
        sys.exit(0)
    fail(e, "ssm:DescribeParameters")
except Exception as e:
    fail(e, "ssm:DescribeParameters")
print(json.dumps({"parameters": found}))
`

// checkSecureStrings checks, from their metadata only, that each
// SecureString the functions read at cold start exists, is a SecureString
// and is encrypted with a key the functions may use: the AWS-managed
// aws/ssm key, or DownstreamApiKeyKmsKeyArn, which the template grants.
// Any other would deploy functions that can not start, and a first create
// runs no PreTraffic check. A deployer without ssm:DescribeParameters is
// told, and the deploy goes on.
func checkSecureStrings(ctx context.Context, r runner, python string, o options, out io.Writer, params map[string]string) error {
	var names []string
	for _, k := range secureStringParameters {
		if params[k] != "" {
			names = append(names, params[k])
		}
	}
	if len(names) == 0 {
		return nil
	}
	raw, err := r.output(ctx, append([]string{python, "-c", ssmScript, o.region}, names...)...)
	if err != nil {
		return fmt.Errorf("read the SecureStrings' metadata: %w", err)
	}
	var facts ssmFacts
	if err := json.Unmarshal(bytes.TrimSpace(raw), &facts); err != nil {
		return fmt.Errorf("SecureStrings' metadata %q: %w", raw, err)
	}
	if facts.Unchecked != "" {
		fmt.Fprintf(out, "Could not check the SecureStrings (%s): the functions read %s at cold start.\n", facts.Unchecked, strings.Join(names, ", "))
		return nil
	}
	grant := params["DownstreamApiKeyKmsKeyArn"]
	for _, k := range secureStringParameters {
		name := params[k]
		if name == "" {
			continue
		}
		p, ok := facts.Parameters[name]
		switch {
		case !ok:
			return fmt.Errorf("%s: the SSM parameter %s does not exist in %s; store it first (aws ssm put-parameter --type SecureString, docs/deploy.md), or name another (make deploy ARGS=-guided): the functions read it at cold start", k, name, o.region)
		case p.Type != "SecureString":
			return fmt.Errorf("%s: the SSM parameter %s is a %s, not a SecureString: store the key encrypted (--type SecureString)", k, name, p.Type)
		case p.KeyID == "" || p.KeyID == awsManagedSSMKey || strings.HasSuffix(p.KeyID, ":"+awsManagedSSMKey):
		case grant == "":
			return fmt.Errorf("%s: %s is encrypted with the KMS key %s, which the functions may not use: set DownstreamApiKeyKmsKeyArn to its full key ARN (make deploy ARGS=-guided)", k, name, p.KeyID)
		case !sameKMSKey(p.KeyID, grant):
			return fmt.Errorf("%s: %s is encrypted with the KMS key %s, not DownstreamApiKeyKmsKeyArn %s, the one the functions may use (make deploy ARGS=-guided to change it)", k, name, p.KeyID, grant)
		}
	}
	return nil
}

// sameKMSKey reports whether keyID (as SSM reports it: a key ARN, a key id,
// an alias or an alias ARN) names the key whose full ARN is keyARN. An
// alias can not be resolved here and is taken for the key it may name.
func sameKMSKey(keyID, keyARN string) bool {
	switch {
	case keyID == keyARN:
		return true
	case strings.HasPrefix(keyID, "alias/") || strings.Contains(keyID, ":alias/"):
		return true
	case !strings.HasPrefix(keyID, "arn:"):
		return strings.HasSuffix(keyARN, ":key/"+keyID)
	}
	return false
}
