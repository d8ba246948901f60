package alpha

import (
	"encoding/json"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// Hand-written decoders of the alpha chat completions request (see Reader): each fills the struct the
// go-json-experiment decoder filled before, with the same results (FuzzHandDecoders).

var (
	chatMessagesScratch jsonkit.Scratch[ChatMessageIn]
	chatCallsScratch    jsonkit.Scratch[chatToolCall]
)

var ChatRequestNames = jsonkit.Fields("model", "messages", "Tools", "tool_choice", "parallel_tool_calls",
	"max_completion_tokens", "max_tokens", "temperature", "top_p", "stop", "stream", "stream_options", "n", "seed",
	"presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias", "response_format",
	"reasoning_effort", "modalities", "audio", "service_tier", "user", "safety_identifier", "web_search_options",
	"functions")

func (in *ChatRequestIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch ChatRequestNames.Match(name) {
		case "model":
			return d.Str(&in.Model)
		case "messages":
			out := in.Messages[:0]
			null, err := d.Array(func(int) error {
				out = append(out, ChatMessageIn{})
				return out[len(out)-1].Read(d, &in.Calls)
			})
			in.Messages = jsonkit.SliceResult(out, null)
			return err
		case "Tools":
			return d.RawList(&in.Tools)
		case "tool_choice":
			return d.Raw(&in.ToolChoice)
		case "parallel_tool_calls":
			return d.BoolPtr(&in.ParallelToolCalls)
		case "max_completion_tokens":
			return d.IntPtr(&in.MaxCompletionTokens)
		case "max_tokens":
			return d.IntPtr(&in.MaxTokens)
		case "temperature":
			return d.FloatPtr(&in.Temperature)
		case "top_p":
			return d.FloatPtr(&in.TopP)
		case "stop":
			return d.Raw(&in.Stop)
		case "stream":
			return d.Boolean(&in.Stream)
		case "stream_options":
			if ok, err := jsonkit.Want(d, &in.StreamOptions); !ok || err != nil {
				return err
			}
			return in.StreamOptions.Read(d)
		case "n":
			return d.IntPtr(&in.N)
		case "seed":
			return d.Int64Ptr(&in.Seed)
		case "presence_penalty":
			return d.FloatPtr(&in.PresencePenalty)
		case "frequency_penalty":
			return d.FloatPtr(&in.FrequencyPenalty)
		case "logprobs":
			return d.BoolPtr(&in.Logprobs)
		case "top_logprobs":
			return d.IntPtr(&in.TopLogprobs)
		case "logit_bias":
			return d.Raw(&in.LogitBias)
		case "response_format":
			return d.Raw(&in.ResponseFormat)
		case "reasoning_effort":
			return d.Str(&in.ReasoningEffort)
		case "modalities":
			return d.Strs(&in.Modalities)
		case "audio":
			return d.Raw(&in.Audio)
		case "service_tier":
			return d.Str(&in.ServiceTier)
		case "user":
			return d.Str(&in.User)
		case "safety_identifier":
			return d.Str(&in.SafetyIdentifier)
		case "web_search_options":
			return d.Raw(&in.WebSearchOptions)
		case "functions":
			return d.Raw(&in.Functions)
		}
		return d.Skip()
	})
	if null {
		*in = ChatRequestIn{}
	}
	return err
}

var chatStreamOptionsNames = jsonkit.Fields("include_usage")

func (o *chatStreamOptions) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		if chatStreamOptionsNames.Match(name) == "include_usage" {
			return d.Boolean(&o.IncludeUsage)
		}
		return d.Skip()
	})
	if null {
		*o = chatStreamOptions{}
	}
	return err
}

var ChatMessageNames = jsonkit.Fields("role", "content", "tool_calls", "tool_call_id", "reasoning_content", "refusal",
	"function_call")

// Read reads a message; its tool calls are appended to *calls (the request's, one array for all messages).
func (m *ChatMessageIn) Read(d *jsonkit.Reader, calls *[]chatToolCall) error {
	null, err := d.Object(func(name string) error {
		switch ChatMessageNames.Match(name) {
		case "role":
			return d.Str(&m.Role)
		case "content":
			m.Text, m.IsText = "", false
			if d.Peek() != jsonkit.KindString {
				return d.Raw(&m.Content)
			}
			start := d.I
			s, err := d.StrTok() // a string is read once, not skipped and then unquoted
			if err != nil {
				return err
			}
			m.Text, m.IsText = s, true
			m.Content = json.RawMessage(d.B[start:d.I:d.I])
			return nil
		case "tool_calls":
			out := *calls
			start := len(out)
			null, err := d.Array(func(int) error {
				out = append(out, chatToolCall{})
				return out[len(out)-1].Read(d)
			})
			*calls = out
			m.ToolCalls = jsonkit.SliceResult(out[start:len(out):len(out)], null)
			return err
		case "tool_call_id":
			return d.Str(&m.ToolCallID)
		case "reasoning_content":
			return d.Str(&m.ReasoningContent)
		case "refusal":
			return d.StrPtr(&m.Refusal)
		case "function_call":
			return d.Raw(&m.FunctionCall)
		}
		return d.Skip()
	})
	if null {
		*m = ChatMessageIn{}
	}
	return err
}

var chatToolCallNames = jsonkit.Fields("index", "id", "type", "function")

var nameArgumentsNames = jsonkit.Fields("name", "arguments")

func (tc *chatToolCall) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch chatToolCallNames.Match(name) {
		case "index":
			return d.IntPtr(&tc.Index)
		case "id":
			return d.Str(&tc.ID)
		case "type":
			return d.Str(&tc.Type)
		case "function":
			f := &tc.Function
			null, err := d.Object(func(name string) error {
				switch nameArgumentsNames.Match(name) {
				case "name":
					return d.Str(&f.Name)
				case "arguments":
					return d.Str(&f.Arguments)
				}
				return d.Skip()
			})
			if null {
				f.Name, f.Arguments = "", ""
			}
			return err
		}
		return d.Skip()
	})
	if null {
		*tc = chatToolCall{}
	}
	return err
}

var typeFunctionNames = jsonkit.Fields("type", "function")

func (t *ChatToolIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch typeFunctionNames.Match(name) {
		case "type":
			return d.Str(&t.Type)
		case "function":
			return t.Function.Read(d)
		}
		return d.Skip()
	})
	if null {
		*t = ChatToolIn{}
	}
	return err
}

var chatFormatNames = jsonkit.Fields("type", "json_schema")

var chatJSONSchemaNames = jsonkit.Fields("name", "schema", "strict")

func (f *ChatFormatIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch chatFormatNames.Match(name) {
		case "type":
			return d.Str(&f.Type)
		case "json_schema":
			s := &f.JSONSchema
			null, err := d.Object(func(name string) error {
				switch chatJSONSchemaNames.Match(name) {
				case "name":
					return d.Str(&s.Name)
				case "schema":
					return d.Raw(&s.Schema)
				case "strict":
					return d.BoolPtr(&s.Strict)
				}
				return d.Skip()
			})
			if null {
				s.Name, s.Schema, s.Strict = "", nil, nil
			}
			return err
		}
		return d.Skip()
	})
	if null {
		*f = ChatFormatIn{}
	}
	return err
}

var typeNameFunctionNames = jsonkit.Fields("type", "name", "function")

var nameNames = jsonkit.Fields("name")

func (o *ChatToolChoiceIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch typeNameFunctionNames.Match(name) {
		case "type":
			return d.Str(&o.Type)
		case "name":
			return d.Str(&o.Name)
		case "function":
			f := &o.Function
			null, err := d.Object(func(name string) error {
				if nameNames.Match(name) == "name" {
					return d.Str(&f.Name)
				}
				return d.Skip()
			})
			if null {
				f.Name = ""
			}
			return err
		}
		return d.Skip()
	})
	if null {
		*o = ChatToolChoiceIn{}
	}
	return err
}

// ReadChatParts reads a message's content parts into *dst.
func ReadChatParts(d *jsonkit.Reader, dst *[]chatPartIn) error {
	out := (*dst)[:0]
	null, err := d.Array(func(int) error {
		out = append(out, chatPartIn{})
		return out[len(out)-1].Read(d)
	})
	*dst = jsonkit.SliceResult(out, null)
	return err
}

var chatPartNames = jsonkit.Fields("type", "text", "refusal", "image_url", "file")

var chatImageURLNames = jsonkit.Fields("url", "detail")

var chatFileNames = jsonkit.Fields("file_data", "file_id", "filename")

func (p *chatPartIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch chatPartNames.Match(name) {
		case "type":
			return d.Str(&p.Type)
		case "text":
			return d.Str(&p.Text)
		case "refusal":
			return d.Str(&p.Refusal)
		case "image_url":
			u := &p.ImageURL
			null, err := d.Object(func(name string) error {
				switch chatImageURLNames.Match(name) {
				case "url":
					return d.Str(&u.URL)
				case "detail":
					return d.Str(&u.Detail)
				}
				return d.Skip()
			})
			if null {
				u.URL, u.Detail = "", ""
			}
			return err
		case "file":
			f := &p.File
			null, err := d.Object(func(name string) error {
				switch chatFileNames.Match(name) {
				case "file_data":
					return d.Str(&f.FileData)
				case "file_id":
					return d.Str(&f.FileID)
				case "filename":
					return d.Str(&f.Filename)
				}
				return d.Skip()
			})
			if null {
				f.FileData, f.FileID, f.Filename = "", "", ""
			}
			return err
		}
		return d.Skip()
	})
	if null {
		*p = chatPartIn{}
	}
	return err
}
