package dev

import (
	"context"
	"fmt"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	openai "github.com/openai/openai-go"
	ooption "github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
	"google.golang.org/genai"
)

// sdkText sends e's request through the SDK the example names, configured with the base URL the banner
// prints for it (baseURL + e.SDKBase) and key as its API key, and answers the assistant's text.
func sdkText(t *testing.T, ctx context.Context, e Example, baseURL, key, model string) (string, error) {
	t.Helper()
	sdkBase := baseURL + e.SDKBase
	const prompt = "Hello from an SDK"
	switch e.Path {
	case "/v1/chat/completions":
		c := openai.NewClient(ooption.WithBaseURL(sdkBase+"/"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
		resp, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
		if err != nil {
			return "", err
		}
		if len(resp.Choices) == 0 {
			return "", fmt.Errorf("no choices: %s", resp.RawJSON())
		}
		return resp.Choices[0].Message.Content, nil
	case "/v1/responses":
		c := openai.NewClient(ooption.WithBaseURL(sdkBase+"/"), ooption.WithAPIKey(key), ooption.WithMaxRetries(0))
		resp, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: model,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}})
		if err != nil {
			return "", err
		}
		return resp.OutputText(), nil
	case "/v1/messages":
		c := anthropic.NewClient(aoption.WithBaseURL(sdkBase), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
		resp, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
		if err != nil {
			return "", err
		}
		var text string
		for _, b := range resp.Content {
			text += b.Text
		}
		return text, nil
	case "/v1beta/models/" + model + ":generateContent":
		c, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: sdkBase}})
		if err != nil {
			return "", err
		}
		resp, err := c.Models.GenerateContent(ctx, model, genai.Text(prompt), nil)
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	}
	return "", fmt.Errorf("no SDK call for %s", e.Path)
}
