package beta

import (
	"encoding/json"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// Hand-written decoders of the beta messages request (see Reader): each fills the struct the go-json-experiment
// decoder filled before, with the same results (FuzzHandDecoders).

var betaMessagesScratch jsonkit.Scratch[betaMessageIn]

var betaBlocksScratch jsonkit.Scratch[Block]

var betaRequestNames = jsonkit.Fields("model", "system", "messages", "tools", "tool_choice", "max_tokens", "temperature",
	"top_p", "top_k", "stop_sequences", "stream", "thinking", "output_config", "metadata", "service_tier",
	"mcp_servers", "container", "context_management")

func (in *RequestIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch betaRequestNames.Match(name) {
		case "model":
			return d.Str(&in.Model)
		case "system":
			return d.Raw(&in.System)
		case "messages":
			out := in.Messages[:0]
			null, err := d.Array(func(int) error {
				out = append(out, betaMessageIn{})
				return out[len(out)-1].Read(d, &in.Blocks)
			})
			in.Messages = jsonkit.SliceResult(out, null)
			return err
		case "tools":
			return d.RawList(&in.Tools)
		case "tool_choice":
			return d.Raw(&in.ToolChoice)
		case "max_tokens":
			return d.IntPtr(&in.MaxTokens)
		case "temperature":
			return d.FloatPtr(&in.Temperature)
		case "top_p":
			return d.FloatPtr(&in.TopP)
		case "top_k":
			return d.IntPtr(&in.TopK)
		case "stop_sequences":
			return d.Strs(&in.StopSequences)
		case "stream":
			return d.Boolean(&in.Stream)
		case "thinking":
			if ok, err := jsonkit.Want(d, &in.Thinking); !ok || err != nil {
				return err
			}
			return in.Thinking.Read(d)
		case "output_config":
			if ok, err := jsonkit.Want(d, &in.OutputConfig); !ok || err != nil {
				return err
			}
			return in.OutputConfig.Read(d)
		case "metadata":
			if ok, err := jsonkit.Want(d, &in.Metadata); !ok || err != nil {
				return err
			}
			return in.Metadata.Read(d)
		case "service_tier":
			return d.Str(&in.ServiceTier)
		case "mcp_servers":
			return d.Raw(&in.MCPServers)
		case "container":
			return d.Raw(&in.Container)
		case "context_management":
			return d.Raw(&in.ContextManagement)
		}
		return d.Skip()
	})
	if null {
		*in = RequestIn{}
	}
	return err
}

var roleContentNames = jsonkit.Fields("role", "content")

// Read reads a message, its content included (m.pre), the content blocks into *blocks.
func (m *betaMessageIn) Read(d *jsonkit.Reader, blocks *[]Block) error {
	null, err := d.Object(func(name string) error {
		switch roleContentNames.Match(name) {
		case "role":
			return d.Str(&m.Role)
		case "content":
			return m.Pre.readFrom(d, blocks, &m.Content)
		}
		return d.Skip()
	})
	if null {
		*m = betaMessageIn{}
	}
	return err
}

var betaThinkingNames = jsonkit.Fields("type", "budget_tokens")

func (t *betaThinkingIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch betaThinkingNames.Match(name) {
		case "type":
			return d.Str(&t.Type)
		case "budget_tokens":
			return d.Integer(&t.BudgetTokens)
		}
		return d.Skip()
	})
	if null {
		*t = betaThinkingIn{}
	}
	return err
}

var betaOutputConfigNames = jsonkit.Fields("effort", "format")

var typeSchemaNames = jsonkit.Fields("type", "schema")

func (c *betaOutputConfig) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch betaOutputConfigNames.Match(name) {
		case "effort":
			return d.Str(&c.Effort)
		case "format":
			if ok, err := jsonkit.Want(d, &c.Format); !ok || err != nil {
				return err
			}
			f := c.Format
			null, err := d.Object(func(name string) error {
				switch typeSchemaNames.Match(name) {
				case "type":
					return d.Str(&f.Type)
				case "schema":
					return d.Raw(&f.Schema)
				}
				return d.Skip()
			})
			if null {
				*f = betaFormatIn{}
			}
			return err
		}
		return d.Skip()
	})
	if null {
		*c = betaOutputConfig{}
	}
	return err
}

var betaMetadataNames = jsonkit.Fields("user_id")

func (m *betaMetadata) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		if betaMetadataNames.Match(name) == "user_id" {
			return d.Str(&m.UserID)
		}
		return d.Skip()
	})
	if null {
		*m = betaMetadata{}
	}
	return err
}

var betaToolNames = jsonkit.Fields("type", "name", "description", "input_schema")

func (t *ToolIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch betaToolNames.Match(name) {
		case "type":
			return d.Str(&t.Type)
		case "name":
			return d.Str(&t.Name)
		case "description":
			return d.Str(&t.Description)
		case "input_schema":
			return d.Raw(&t.InputSchema)
		}
		return d.Skip()
	})
	if null {
		*t = ToolIn{}
	}
	return err
}

var betaToolChoiceNames = jsonkit.Fields("type", "name", "disable_parallel_tool_use")

func (t *ToolChoiceIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch betaToolChoiceNames.Match(name) {
		case "type":
			return d.Str(&t.Type)
		case "name":
			return d.Str(&t.Name)
		case "disable_parallel_tool_use":
			return d.Boolean(&t.DisableParallelToolUse)
		}
		return d.Skip()
	})
	if null {
		*t = ToolChoiceIn{}
	}
	return err
}

// ReadBlocks reads content blocks into *dst (reused storage).
func ReadBlocks(d *jsonkit.Reader, dst *[]Block) error {
	out := (*dst)[:0]
	null, err := d.Array(func(int) error {
		out = append(out, Block{})
		return out[len(out)-1].Read(d)
	})
	*dst = jsonkit.SliceResult(out, null)
	return err
}

var betaBlockNames = jsonkit.Fields("type", "text", "source", "id", "name", "input", "tool_use_id", "content", "is_error",
	"thinking", "signature", "data", "title")

var betaSourceNames = jsonkit.Fields("type", "media_type", "data", "url")

func (b *Block) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch betaBlockNames.Match(name) {
		case "type":
			return d.Str(&b.Type)
		case "text":
			return d.Str(&b.Text)
		case "source":
			if ok, err := jsonkit.Want(d, &b.Source); !ok || err != nil {
				return err
			}
			s := b.Source
			null, err := d.Object(func(name string) error {
				switch betaSourceNames.Match(name) {
				case "type":
					return d.Str(&s.Type)
				case "media_type":
					return d.Str(&s.MediaType)
				case "data":
					return d.Str(&s.Data)
				case "url":
					return d.Str(&s.URL)
				}
				return d.Skip()
			})
			if null {
				*s = betaSource{}
			}
			return err
		case "id":
			return d.Str(&b.ID)
		case "name":
			return d.Str(&b.Name)
		case "input":
			return d.Raw(&b.Input)
		case "tool_use_id":
			return d.Str(&b.ToolUseID)
		case "content":
			return d.Raw(&b.Content)
		case "is_error":
			return d.Boolean(&b.IsError)
		case "thinking":
			return d.StrPtr(&b.Thinking)
		case "signature":
			return d.StrPtr(&b.Signature)
		case "data":
			return d.Str(&b.Data)
		case "title":
			return d.Str(&b.Title)
		}
		return d.Skip()
	})
	if null {
		*b = Block{}
	}
	return err
}

// readFrom reads a message's content (also as raw, into *raw) in the body's one pass: a string, or blocks
// appended to *blocks. An error that is not in the body's syntax (a value of the wrong kind) is kept in
// c.err and the content skipped: the caller reports it when it converts the message, where it decoded the
// content kept raw before; a syntax error is the body's, returned at once as before.
func (c *Content) readFrom(d *jsonkit.Reader, blocks *[]Block, raw *json.RawMessage) error {
	d.Ws()
	start, depth, n := d.I, d.Depth, len(*blocks)
	*c = Content{read: true}
	var err error
	if d.Peek() == jsonkit.KindString {
		c.isText = true
		err = d.Str(&c.text)
	} else {
		out := *blocks
		var null bool
		null, err = d.Array(func(int) error {
			out = append(out, Block{})
			return out[len(out)-1].Read(d)
		})
		*blocks = out
		if !null {
			c.blocks = out[n:len(out):len(out)]
		}
	}
	if err != nil {
		d.I, d.Depth = start, depth
		if err := d.Skip(); err != nil {
			return err
		}
		*c = Content{read: true, err: err}
	}
	*raw = json.RawMessage(d.B[start:d.I:d.I])
	return nil
}
