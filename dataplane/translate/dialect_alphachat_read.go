package translate

import "encoding/json"

// Hand-written decoders of the alpha chat completions request (see jr): each fills the struct the
// go-json-experiment decoder filled before, with the same results (FuzzHandDecoders).

var (
	chatMessagesScratch scratch[chatMessageIn]
	chatCallsScratch    scratch[chatToolCall]
)

var chatRequestNames = fields("model", "messages", "Tools", "tool_choice", "parallel_tool_calls",
	"max_completion_tokens", "max_tokens", "temperature", "top_p", "stop", "stream", "stream_options", "n", "seed",
	"presence_penalty", "frequency_penalty", "logprobs", "top_logprobs", "logit_bias", "response_format",
	"reasoning_effort", "modalities", "audio", "service_tier", "user", "safety_identifier", "web_search_options",
	"functions")

func (in *chatRequestIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, chatRequestNames) {
		case 0:
			return d.str(&in.Model)
		case 1:
			out := in.Messages[:0]
			null, err := d.array(func(int) error {
				out = append(out, chatMessageIn{})
				return out[len(out)-1].read(d, &in.calls)
			})
			in.Messages = sliceResult(out, null)
			return err
		case 2:
			return d.rawList(&in.Tools)
		case 3:
			return d.raw(&in.ToolChoice)
		case 4:
			return d.boolPtr(&in.ParallelToolCalls)
		case 5:
			return d.intPtr(&in.MaxCompletionTokens)
		case 6:
			return d.intPtr(&in.MaxTokens)
		case 7:
			return d.floatPtr(&in.Temperature)
		case 8:
			return d.floatPtr(&in.TopP)
		case 9:
			return d.raw(&in.Stop)
		case 10:
			return d.boolean(&in.Stream)
		case 11:
			if ok, err := want(d, &in.StreamOptions); !ok || err != nil {
				return err
			}
			return in.StreamOptions.read(d)
		case 12:
			return d.intPtr(&in.N)
		case 13:
			return d.int64Ptr(&in.Seed)
		case 14:
			return d.floatPtr(&in.PresencePenalty)
		case 15:
			return d.floatPtr(&in.FrequencyPenalty)
		case 16:
			return d.boolPtr(&in.Logprobs)
		case 17:
			return d.intPtr(&in.TopLogprobs)
		case 18:
			return d.raw(&in.LogitBias)
		case 19:
			return d.raw(&in.ResponseFormat)
		case 20:
			return d.str(&in.ReasoningEffort)
		case 21:
			return d.strs(&in.Modalities)
		case 22:
			return d.raw(&in.Audio)
		case 23:
			return d.str(&in.ServiceTier)
		case 24:
			return d.str(&in.User)
		case 25:
			return d.str(&in.SafetyIdentifier)
		case 26:
			return d.raw(&in.WebSearchOptions)
		case 27:
			return d.raw(&in.Functions)
		}
		return d.skip()
	})
	if null {
		*in = chatRequestIn{}
	}
	return err
}

var chatStreamOptionsNames = fields("include_usage")

func (o *chatStreamOptions) read(d *jr) error {
	null, err := d.object(func(name string) error {
		if fieldOf(name, chatStreamOptionsNames) == 0 {
			return d.boolean(&o.IncludeUsage)
		}
		return d.skip()
	})
	if null {
		*o = chatStreamOptions{}
	}
	return err
}

var chatMessageNames = fields("role", "content", "tool_calls", "tool_call_id", "reasoning_content", "refusal",
	"function_call")

// read reads a message; its tool calls are appended to *calls (the request's, one array for all messages).
func (m *chatMessageIn) read(d *jr, calls *[]chatToolCall) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, chatMessageNames) {
		case 0:
			return d.str(&m.Role)
		case 1:
			m.text, m.isText = "", false
			if d.peek() != '"' {
				return d.raw(&m.Content)
			}
			start := d.i
			s, err := d.strTok() // a string is read once, not skipped and then unquoted
			if err != nil {
				return err
			}
			m.text, m.isText = s, true
			m.Content = json.RawMessage(d.b[start:d.i:d.i])
			return nil
		case 2:
			out := *calls
			start := len(out)
			null, err := d.array(func(int) error {
				out = append(out, chatToolCall{})
				return out[len(out)-1].read(d)
			})
			*calls = out
			m.ToolCalls = sliceResult(out[start:len(out):len(out)], null)
			return err
		case 3:
			return d.str(&m.ToolCallID)
		case 4:
			return d.str(&m.ReasoningContent)
		case 5:
			return d.strPtr(&m.Refusal)
		case 6:
			return d.raw(&m.FunctionCall)
		}
		return d.skip()
	})
	if null {
		*m = chatMessageIn{}
	}
	return err
}

var chatToolCallNames = fields("index", "id", "type", "function")
var nameArgumentsNames = fields("name", "arguments")

func (tc *chatToolCall) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, chatToolCallNames) {
		case 0:
			return d.intPtr(&tc.Index)
		case 1:
			return d.str(&tc.ID)
		case 2:
			return d.str(&tc.Type)
		case 3:
			f := &tc.Function
			null, err := d.object(func(name string) error {
				switch fieldOf(name, nameArgumentsNames) {
				case 0:
					return d.str(&f.Name)
				case 1:
					return d.str(&f.Arguments)
				}
				return d.skip()
			})
			if null {
				f.Name, f.Arguments = "", ""
			}
			return err
		}
		return d.skip()
	})
	if null {
		*tc = chatToolCall{}
	}
	return err
}

var typeFunctionNames = fields("type", "function")

func (t *chatToolIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, typeFunctionNames) {
		case 0:
			return d.str(&t.Type)
		case 1:
			return t.Function.read(d)
		}
		return d.skip()
	})
	if null {
		*t = chatToolIn{}
	}
	return err
}

var toolMemberNames = fields("name", "description", "parameters", "strict")

// read decodes a function tool (alpha chat's function, alpha responses' tool).
func (t *tool) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, toolMemberNames) {
		case 0:
			return d.str(&t.Name)
		case 1:
			return d.str(&t.Description)
		case 2:
			return d.raw(&t.Parameters)
		case 3:
			return d.boolPtr(&t.Strict)
		}
		return d.skip()
	})
	if null {
		*t = tool{}
	}
	return err
}

var chatFormatNames = fields("type", "json_schema")
var chatJSONSchemaNames = fields("name", "schema", "strict")

func (f *chatFormatIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, chatFormatNames) {
		case 0:
			return d.str(&f.Type)
		case 1:
			s := &f.JSONSchema
			null, err := d.object(func(name string) error {
				switch fieldOf(name, chatJSONSchemaNames) {
				case 0:
					return d.str(&s.Name)
				case 1:
					return d.raw(&s.Schema)
				case 2:
					return d.boolPtr(&s.Strict)
				}
				return d.skip()
			})
			if null {
				s.Name, s.Schema, s.Strict = "", nil, nil
			}
			return err
		}
		return d.skip()
	})
	if null {
		*f = chatFormatIn{}
	}
	return err
}

var typeNameFunctionNames = fields("type", "name", "function")
var nameNames = fields("name")

func (o *chatToolChoiceIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, typeNameFunctionNames) {
		case 0:
			return d.str(&o.Type)
		case 1:
			return d.str(&o.Name)
		case 2:
			f := &o.Function
			null, err := d.object(func(name string) error {
				if fieldOf(name, nameNames) == 0 {
					return d.str(&f.Name)
				}
				return d.skip()
			})
			if null {
				f.Name = ""
			}
			return err
		}
		return d.skip()
	})
	if null {
		*o = chatToolChoiceIn{}
	}
	return err
}

// readChatParts reads a message's content parts into *dst.
func readChatParts(d *jr, dst *[]chatPartIn) error {
	out := (*dst)[:0]
	null, err := d.array(func(int) error {
		out = append(out, chatPartIn{})
		return out[len(out)-1].read(d)
	})
	*dst = sliceResult(out, null)
	return err
}

var chatPartNames = fields("type", "text", "refusal", "image_url", "file")
var chatImageURLNames = fields("url", "detail")
var chatFileNames = fields("file_data", "file_id", "filename")

func (p *chatPartIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, chatPartNames) {
		case 0:
			return d.str(&p.Type)
		case 1:
			return d.str(&p.Text)
		case 2:
			return d.str(&p.Refusal)
		case 3:
			u := &p.ImageURL
			null, err := d.object(func(name string) error {
				switch fieldOf(name, chatImageURLNames) {
				case 0:
					return d.str(&u.URL)
				case 1:
					return d.str(&u.Detail)
				}
				return d.skip()
			})
			if null {
				u.URL, u.Detail = "", ""
			}
			return err
		case 4:
			f := &p.File
			null, err := d.object(func(name string) error {
				switch fieldOf(name, chatFileNames) {
				case 0:
					return d.str(&f.FileData)
				case 1:
					return d.str(&f.FileID)
				case 2:
					return d.str(&f.Filename)
				}
				return d.skip()
			})
			if null {
				f.FileData, f.FileID, f.Filename = "", "", ""
			}
			return err
		}
		return d.skip()
	})
	if null {
		*p = chatPartIn{}
	}
	return err
}

// textPartIn is a {type, text} part of content given as text (rawText).
type textPartIn struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

var typeTextNames = fields("type", "text")

// readTextParts reads an array of {type, text} parts.
func readTextParts(d *jr, dst *[]textPartIn) error {
	out := (*dst)[:0]
	null, err := d.array(func(int) error {
		out = append(out, textPartIn{})
		p := &out[len(out)-1]
		null, err := d.object(func(name string) error {
			switch fieldOf(name, typeTextNames) {
			case 0:
				return d.str(&p.Type)
			case 1:
				return d.str(&p.Text)
			}
			return d.skip()
		})
		if null {
			*p = textPartIn{}
		}
		return err
	})
	*dst = sliceResult(out, null)
	return err
}
