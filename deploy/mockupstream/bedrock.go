package mockupstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// bedrockAnthropicVersion is the anthropic_version Bedrock's InvokeModel requires of a messages body.
const bedrockAnthropicVersion = "bedrock-2023-05-31"

// bedrockRoute answers /model/{modelId}/{invoke,invoke-with-response-stream,converse,converse-stream}.
func (x *exchange) bedrockRoute(path string) {
	rest := strings.TrimPrefix(x.r.URL.EscapedPath(), "/model/")
	i := strings.LastIndex(rest, "/")
	if i <= 0 || x.r.Method != http.MethodPost {
		x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s %s", x.r.Method, path))
		return
	}
	model, err := url.PathUnescape(rest[:i])
	if err != nil {
		x.fail(http.StatusBadRequest, "invalid model identifier")
		return
	}
	x.model = model
	switch rest[i+1:] {
	case "invoke":
		x.bedrockInvoke(model, false)
	case "invoke-with-response-stream":
		x.bedrockInvoke(model, true)
	case "converse":
		x.bedrockConverse(false)
	case "converse-stream":
		x.bedrockConverse(true)
	case "count-tokens":
		x.bedrockCountTokens(model)
	default:
		x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s %s", x.r.Method, path))
	}
}

// bedrockInvoke answers InvokeModel with a beta messages body: anthropic_version must be Bedrock's, the body
// names no model (the path does). The answer is the beta message (streamed: beta events, each the base64
// bytes of a "chunk" event-stream frame); the plain answer carries the token-count headers.
func (x *exchange) bedrockInvoke(model string, stream bool) {
	var head struct {
		AnthropicVersion *string         `json:"anthropic_version"`
		Model            json.RawMessage `json:"model"`
	}
	if err := json.Unmarshal(x.body, &head); err != nil {
		x.fail(http.StatusBadRequest, "Malformed input request, please reformat your input and try again.")
		return
	}
	switch {
	case head.AnthropicVersion == nil:
		x.fail(http.StatusBadRequest, "Malformed input request: #: required key [anthropic_version] not found, please reformat your input and try again.")
		return
	case *head.AnthropicVersion != bedrockAnthropicVersion:
		x.fail(http.StatusBadRequest, "Invalid API version: "+*head.AnthropicVersion)
		return
	case head.Model != nil:
		x.fail(http.StatusBadRequest, "Malformed input request: #: extraneous key [model] is not permitted, please reformat your input and try again.")
		return
	}
	if !x.rewriteBody(map[string]any{"model": model, "stream": stream}, "anthropic_version") {
		return
	}
	x.w.Header().Set("X-Amzn-Bedrock-Content-Type", "application/json")
	x.betaMessages()
}

// bedrockFail answers Bedrock's error shape: {"message"} with the type in x-amzn-errortype.
func (x *exchange) bedrockFail(status int, typ, msg string) {
	h := x.w.Header()
	h.Set("x-amzn-errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	h.Set("x-amzn-RequestId", x.bedrockRequestID())
	x.writeError(status, map[string]string{"message": msg})
}

func (x *exchange) bedrockRequestID() string {
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", x.hash>>32, x.hash&0xffffffffffff)
}

// bedrockErrorType is the Bedrock runtime exception an HTTP status stands for.
func bedrockErrorType(status int) string {
	switch status {
	case 400:
		return "ValidationException"
	case 403:
		return "AccessDeniedException"
	case 404:
		return "ResourceNotFoundException"
	case 408:
		return "ModelTimeoutException"
	case 424:
		return "ModelErrorException"
	case 429:
		return "ThrottlingException"
	case 503:
		return "ServiceUnavailableException"
	}
	if status >= 500 {
		return "InternalServerException"
	}
	return "ValidationException"
}

// bedrockTokenHeaders sets InvokeModel's token-count headers: Bedrock's input count is the uncached input
// (the beta input_tokens), the output count the beta output_tokens.
func (x *exchange) bedrockTokenHeaders(u *betaUsage) {
	if x.cloud != ProviderBedrock || u == nil || u.InputTokens == nil {
		return
	}
	h := x.w.Header()
	h.Set("X-Amzn-Bedrock-Input-Token-Count", strconv.Itoa(*u.InputTokens))
	h.Set("X-Amzn-Bedrock-Output-Token-Count", strconv.Itoa(u.OutputTokens))
	h.Set("X-Amzn-Bedrock-Invocation-Latency", "1")
	if u.CacheReadInputTokens != nil {
		h.Set("X-Amzn-Bedrock-Cache-Read-Input-Token-Count", strconv.Itoa(*u.CacheReadInputTokens))
	}
	if u.CacheCreationInputTokens != nil {
		h.Set("X-Amzn-Bedrock-Cache-Write-Input-Token-Count", strconv.Itoa(*u.CacheCreationInputTokens))
	}
}

// bedrockCountTokens answers CountTokens: {"input":{"invokeModel":{"body": base64}}} counts the prompt an
// InvokeModel call with that body is billed (the same rewrite, the same count); {"input":{"converse":{…}}} the
// prompt of the Converse request made of those fields. Not billed.
func (x *exchange) bedrockCountTokens(model string) {
	var req struct {
		Input struct {
			InvokeModel *struct {
				Body []byte `json:"body"`
			} `json:"invokeModel"`
			Converse json.RawMessage `json:"converse"`
		} `json:"input"`
	}
	if !x.decode(&req) {
		return
	}
	var n int
	switch {
	case req.Input.InvokeModel != nil:
		x.body = req.Input.InvokeModel.Body
		if !x.rewriteBody(map[string]any{"model": model, "stream": false}, "anthropic_version") {
			return
		}
		n = tokensOf(len(x.body))
	case len(req.Input.Converse) > 0:
		n = tokensOf(len(req.Input.Converse))
	default:
		x.fail(http.StatusBadRequest, "input: exactly one of invokeModel or converse is required")
		return
	}
	x.writeJSON(map[string]int{"inputTokens": max(n, 1)})
}
