package mockupstream

import (
	"fmt"
	"net/http"
	"strings"
)

// Azure OpenAI: the deployment form /openai/deployments/{deployment}/{op}?api-version=… (the deployment is
// the model; Azure refuses a call without api-version) and the v1 form /openai/v1/{op} (the body's model
// names the deployment). Auth: the api-key header, or an Entra ID bearer token.

// azureAuth checks the api-key header (Azure's own), else the bearer token against the Entra tokens.
func (x *exchange) azureAuth() bool {
	o := x.s.opts.Clouds
	if k := x.r.Header.Get("api-key"); k != "" {
		if oneOf(k, o.AzureKeys) {
			x.key = k
			return true
		}
	} else if tok := bearerToken(x.r); tok != "" && oneOf(tok, o.AzureEntraTokens) {
		x.key = tok
		return true
	}
	x.fail(http.StatusUnauthorized, "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource.")
	return false
}

// azureRoute answers the chat completions, responses, embeddings and image generation operations.
func (x *exchange) azureRoute(path string) {
	var op string
	if rest, ok := strings.CutPrefix(path, "/openai/v1/"); ok {
		op = rest
	} else if rest, ok := strings.CutPrefix(path, "/openai/deployments/"); ok {
		dep, o, ok := strings.Cut(rest, "/")
		if !ok || dep == "" {
			x.fail(http.StatusNotFound, "Resource not found")
			return
		}
		if x.r.URL.Query().Get("api-version") == "" {
			// What Azure answers a deployment call without api-version.
			x.fail(http.StatusNotFound, "Resource not found")
			return
		}
		// The deployment decides the model, whatever the body says.
		if !x.rewriteBody(map[string]any{"model": dep}) {
			return
		}
		op = o
	}
	if x.r.Method != http.MethodPost {
		x.fail(http.StatusNotFound, fmt.Sprintf("unknown route %s %s", x.r.Method, path))
		return
	}
	switch op {
	case "chat/completions":
		x.alphaChat()
	case "responses":
		x.alphaResponses()
	case "embeddings":
		x.alphaEmbeddings()
	case "images/generations":
		x.alphaImages(false)
	default:
		x.fail(http.StatusNotFound, "Resource not found")
	}
}

// azureFilterVerdict is a content-filter verdict that lets everything through, as Azure's default filter
// reports on an ordinary prompt or answer.
func azureFilterVerdict() fields {
	safe := fields{"filtered", false, "severity", "safe"}
	return fields{"hate", safe, "self_harm", safe, "sexual", safe, "violence", safe}
}

func azurePromptFilterResults() []fields {
	return []fields{{"prompt_index", 0, "content_filter_results", azureFilterVerdict()}}
}

// azurePromptFilterChunk is the first chunk of an Azure chat stream: no choices, only the prompt's verdict.
func azurePromptFilterChunk() fields {
	return fields{"choices", []any{}, "created", 0, "id", "", "model", "", "object", "",
		"prompt_filter_results", azurePromptFilterResults()}
}
