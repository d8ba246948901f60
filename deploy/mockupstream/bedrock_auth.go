package mockupstream

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// maxSkew is how far a SigV4 signing time may be from the service's clock.
const maxSkew = 5 * time.Minute

// sigV4Auth is a parsed "AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…" header.
type sigV4Auth struct {
	accessKey, date, region, service string
	signedHeaders                    []string
	signature                        string
}

// parseSigV4 parses an Authorization header; the signature itself is checked by recomputing it.
func parseSigV4(h string) (sigV4Auth, error) {
	var a sigV4Auth
	alg, rest, ok := strings.Cut(h, " ")
	if !ok || alg != "AWS4-HMAC-SHA256" {
		return a, errors.New("unsupported authorization type")
	}
	var cred, signed string
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return a, fmt.Errorf("malformed authorization component %q", part)
		}
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			a.signature = v
		}
	}
	scope := strings.Split(cred, "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || scope[0] == "" {
		return a, cloudMessage("Credential should be scoped to a valid region and service")
	}
	a.accessKey, a.date, a.region, a.service = scope[0], scope[1], scope[2], scope[3]
	if signed == "" || a.signature == "" {
		return a, cloudMessage("Authorization header requires 'SignedHeaders' and 'Signature' parameters")
	}
	a.signedHeaders = strings.Split(signed, ";")
	return a, nil
}

// bedrockAuth checks a Bedrock request: a Bedrock API key (bearer), or a SigV4 signature recomputed with the
// configured access key by the AWS SDK's signer — any change to the method, path, query, signed headers or
// body, a wrong secret, a missing or expired session token, or a signing time more than 5 minutes from the
// mock's clock is refused as Bedrock refuses it.
func (x *exchange) bedrockAuth() bool {
	o := x.s.opts.Clouds
	r := x.r
	authz := r.Header.Get("Authorization")
	if tok := bearerToken(r); tok != "" {
		if oneOf(tok, o.BedrockAPIKeys) {
			x.key = tok
			return true
		}
		x.bedrockFail(http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return false
	}
	if authz == "" {
		x.bedrockFail(http.StatusForbidden, "MissingAuthenticationTokenException", "Missing Authentication Token")
		return false
	}
	a, err := parseSigV4(authz)
	if err != nil {
		x.bedrockFail(http.StatusBadRequest, "IncompleteSignatureException", err.Error())
		return false
	}
	creds := o.AWS
	if creds.AccessKeyID == "" || a.accessKey != creds.AccessKeyID {
		x.bedrockFail(http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
		return false
	}
	region := o.AWSRegion
	if region == "" {
		region = "us-east-1"
	}
	if a.region != region || a.service != "bedrock" {
		x.bedrockFail(http.StatusForbidden, "InvalidSignatureException",
			fmt.Sprintf("Credential should be scoped to a valid region, not '%s'. Credential should be scoped to correct service: 'bedrock'.", a.region))
		return false
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != a.date {
		x.bedrockFail(http.StatusBadRequest, "IncompleteSignatureException", "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
		return false
	}
	now := x.s.now().UTC()
	if d := now.Sub(at); d > maxSkew || d < -maxSkew {
		x.bedrockFail(http.StatusForbidden, "InvalidSignatureException",
			fmt.Sprintf("Signature expired: %s is now earlier than %s (%s - 5 min.)", at.Format("20060102T150405Z"),
				now.Add(-maxSkew).Format("20060102T150405Z"), now.Format("20060102T150405Z")))
		return false
	}
	tok := r.Header.Get("X-Amz-Security-Token")
	if creds.SessionToken != "" {
		if tok != creds.SessionToken {
			x.bedrockFail(http.StatusForbidden, "UnrecognizedClientException", "The security token included in the request is invalid.")
			return false
		}
		if !creds.SessionExpires.IsZero() && !now.Before(creds.SessionExpires) {
			x.bedrockFail(http.StatusForbidden, "ExpiredTokenException", "The security token included in the request is expired")
			return false
		}
	}
	want, err := x.resign(a, aws.Credentials{AccessKeyID: creds.AccessKeyID, SecretAccessKey: creds.SecretAccessKey,
		SessionToken: tok}, region, at)
	if err != nil || subtle.ConstantTimeCompare([]byte(want), []byte(authz)) != 1 {
		x.bedrockFail(http.StatusForbidden, "InvalidSignatureException",
			"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.")
		return false
	}
	x.key = creds.AccessKeyID
	return true
}

// resign signs a copy of the received request — method, escaped path, query, the headers it says it
// signed, the body's hash — with the SDK's signer, and returns the Authorization header it computes.
func (x *exchange) resign(a sigV4Auth, creds aws.Credentials, region string, at time.Time) (string, error) {
	r := x.r
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return "", fmt.Errorf("rebuild request: %w", err)
	}
	req.Host = r.Host
	req.ContentLength = r.ContentLength
	for _, h := range a.signedHeaders {
		switch h {
		case "host", "content-length":
			continue // the signer takes them from req.Host and req.ContentLength
		}
		if v, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			req.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	sum := sha256.Sum256(x.body)
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, req, hex.EncodeToString(sum[:]), "bedrock", region, at); err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return req.Header.Get("Authorization"), nil
}
