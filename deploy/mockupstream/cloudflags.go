package mockupstream

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// cloudFlags declares the binary's cloud credential flags (env fallbacks MOCKUPSTREAM_*); apply fills
// CloudOptions from them once parsed.
func cloudFlags(fs *flag.FlagSet, getenv func(string) string) (apply func(*CloudOptions) error) {
	str := func(name, env, usage string) *string {
		return fs.String(name, getenv(env), usage+" (env "+env+")")
	}
	akid := str("aws-access-key-id", "MOCKUPSTREAM_AWS_ACCESS_KEY_ID", "Bedrock: the SigV4 access key id accepted")
	secret := str("aws-secret-access-key", "MOCKUPSTREAM_AWS_SECRET_ACCESS_KEY", "Bedrock: its secret")
	session := str("aws-session-token", "MOCKUPSTREAM_AWS_SESSION_TOKEN", "Bedrock: the session token required with it")
	region := str("aws-region", "MOCKUPSTREAM_AWS_REGION", "Bedrock: the signing region (default us-east-1)")
	bedrockKeys := str("bedrock-api-keys", "MOCKUPSTREAM_BEDROCK_API_KEYS", "Bedrock: API keys accepted as bearer tokens, comma-separated")
	sa := str("google-service-account", "MOCKUPSTREAM_GOOGLE_SERVICE_ACCOUNT", "Vertex: service-account JSON key files whose assertions the token endpoint accepts, comma-separated")
	project := str("google-project", "MOCKUPSTREAM_GOOGLE_PROJECT", "Vertex: the only project paths may name (default any)")
	azureKeys := str("azure-api-keys", "MOCKUPSTREAM_AZURE_API_KEYS", "Azure: api-key values accepted, comma-separated")
	entra := str("azure-entra-tokens", "MOCKUPSTREAM_AZURE_ENTRA_TOKENS", "Azure: Entra ID bearer tokens accepted, comma-separated")
	return func(o *CloudOptions) error {
		o.AWS = AWSCredentials{AccessKeyID: *akid, SecretAccessKey: *secret, SessionToken: *session}
		o.AWSRegion, o.GoogleProject = *region, *project
		o.BedrockAPIKeys, o.AzureKeys, o.AzureEntraTokens = list(*bedrockKeys), list(*azureKeys), list(*entra)
		for _, path := range list(*sa) {
			data, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("google service account: %w", err)
			}
			email, pub, err := serviceAccountPublicKey(data)
			if err != nil {
				return fmt.Errorf("google service account %s: %w", path, err)
			}
			if o.GoogleServiceAccounts == nil {
				o.GoogleServiceAccounts = make(map[string]*rsa.PublicKey)
			}
			o.GoogleServiceAccounts[email] = pub
		}
		return nil
	}
}

func list(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// serviceAccountPublicKey reads a service-account JSON key file: its client_email and the public half of its
// private key (the mock is given the same file as the gateway; Google keeps only the public key).
func serviceAccountPublicKey(data []byte) (string, *rsa.PublicKey, error) {
	var f struct {
		ClientEmail string `json:"client_email"`
		PrivateKey  string `json:"private_key"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return "", nil, fmt.Errorf("decode key file: %w", err)
	}
	if f.ClientEmail == "" {
		return "", nil, errors.New("key file has no client_email")
	}
	block, _ := pem.Decode([]byte(f.PrivateKey))
	if block == nil {
		return "", nil, errors.New("key file's private_key is not PEM")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k1, err1 := x509.ParsePKCS1PrivateKey(block.Bytes); err1 == nil {
			return f.ClientEmail, &k1.PublicKey, nil
		}
		return "", nil, fmt.Errorf("parse private_key: %w", err)
	}
	rk, ok := key.(*rsa.PrivateKey)
	if !ok {
		return "", nil, fmt.Errorf("private_key is %T, want RSA", key)
	}
	return f.ClientEmail, &rk.PublicKey, nil
}
