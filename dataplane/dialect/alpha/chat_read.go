package alpha

import (
	"encoding/json"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// Hand-written decoders of the alpha chat completions request (see jr): each fills the struct the
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
		switch jsonkit.FieldOf(name, ChatRequestNames) {
		case 0:
			return d.Str(&in.Model)
		case 1:
			out := in.Messages[:0]
			null, err := d.Array(func(int) error {
				out = append(out, ChatMessageIn{})
				return out[len(out)-1].Read(d, &in.Calls)
			})
			in.Messages = canon.SliceResult(out, null)
			return err
		case 2:
			return d.RawList(&in.Tools)
		case 3:
			return d.Raw(&in.ToolChoice)
		case 4:
			return d.BoolPtr(&in.ParallelToolCalls)
		case 5:
			return d.IntPtr(&in.MaxCompletionTokens)
		case 6:
			return d.IntPtr(&in.MaxTokens)
		case 7:
			return d.FloatPtr(&in.Temperature)
		case 8:
			return d.FloatPtr(&in.TopP)
		case 9:
			return d.Raw(&in.Stop)
		case 10:
			return d.Boolean(&in.Stream)
		case 11:
			if ok, err := canon.Want(d, &in.StreamOptions); !ok || err != nil {
				return err
			}
			return in.StreamOptions.Read(d)
		case 12:
			return d.IntPtr(&in.N)
		case 13:
			return d.Int64Ptr(&in.Seed)
		case 14:
			return d.FloatPtr(&in.PresencePenalty)
		case 15:
			return d.FloatPtr(&in.FrequencyPenalty)
		case 16:
			return d.BoolPtr(&in.Logprobs)
		case 17:
			return d.IntPtr(&in.TopLogprobs)
		case 18:
			return d.Raw(&in.LogitBias)
		case 19:
			return d.Raw(&in.ResponseFormat)
		case 20:
			return d.Str(&in.ReasoningEffort)
		case 21:
			return d.Strs(&in.Modalities)
		case 22:
			return d.Raw(&in.Audio)
		case 23:
			return d.Str(&in.ServiceTier)
		case 24:
			return d.Str(&in.User)
		case 25:
			return d.Str(&in.SafetyIdentifier)
		case 26:
			return d.Raw(&in.WebSearchOptions)
		case 27:
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
		if jsonkit.FieldOf(name, chatStreamOptionsNames) == 0 {
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
		switch jsonkit.FieldOf(name, ChatMessageNames) {
		case 0:
			return d.Str(&m.Role)
		case 1:
			m.Text, m.IsText = "", false
			if d.Peek() != '"' {
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
		case 2:
			out := *calls
			start := len(out)
			null, err := d.Array(func(int) error {
				out = append(out, chatToolCall{})
				return out[len(out)-1].Read(d)
			})
			*calls = out
			m.ToolCalls = canon.SliceResult(out[start:len(out):len(out)], null)
			return err
		case 3:
			return d.Str(&m.ToolCallID)
		case 4:
			return d.Str(&m.ReasoningContent)
		case 5:
			return d.StrPtr(&m.Refusal)
		case 6:
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
		switch jsonkit.FieldOf(name, chatToolCallNames) {
		case 0:
			return d.IntPtr(&tc.Index)
		case 1:
			return d.Str(&tc.ID)
		case 2:
			return d.Str(&tc.Type)
		case 3:
			f := &tc.Function
			null, err := d.Object(func(name string) error {
				switch jsonkit.FieldOf(name, nameArgumentsNames) {
				case 0:
					return d.Str(&f.Name)
				case 1:
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
		switch jsonkit.FieldOf(name, typeFunctionNames) {
		case 0:
			return d.Str(&t.Type)
		case 1:
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
		switch jsonkit.FieldOf(name, chatFormatNames) {
		case 0:
			return d.Str(&f.Type)
		case 1:
			s := &f.JSONSchema
			null, err := d.Object(func(name string) error {
				switch jsonkit.FieldOf(name, chatJSONSchemaNames) {
				case 0:
					return d.Str(&s.Name)
				case 1:
					return d.Raw(&s.Schema)
				case 2:
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
		switch jsonkit.FieldOf(name, typeNameFunctionNames) {
		case 0:
			return d.Str(&o.Type)
		case 1:
			return d.Str(&o.Name)
		case 2:
			f := &o.Function
			null, err := d.Object(func(name string) error {
				if jsonkit.FieldOf(name, nameNames) == 0 {
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
	*dst = canon.SliceResult(out, null)
	return err
}

var chatPartNames = jsonkit.Fields("type", "text", "refusal", "image_url", "file")

var chatImageURLNames = jsonkit.Fields("url", "detail")

var chatFileNames = jsonkit.Fields("file_data", "file_id", "filename")

func (p *chatPartIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch jsonkit.FieldOf(name, chatPartNames) {
		case 0:
			return d.Str(&p.Type)
		case 1:
			return d.Str(&p.Text)
		case 2:
			return d.Str(&p.Refusal)
		case 3:
			u := &p.ImageURL
			null, err := d.Object(func(name string) error {
				switch jsonkit.FieldOf(name, chatImageURLNames) {
				case 0:
					return d.Str(&u.URL)
				case 1:
					return d.Str(&u.Detail)
				}
				return d.Skip()
			})
			if null {
				u.URL, u.Detail = "", ""
			}
			return err
		case 4:
			f := &p.File
			null, err := d.Object(func(name string) error {
				switch jsonkit.FieldOf(name, chatFileNames) {
				case 0:
					return d.Str(&f.FileData)
				case 1:
					return d.Str(&f.FileID)
				case 2:
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
