package translate

import "encoding/json"

// Hand-written decoders of the beta messages request (see jr): each fills the struct the go-json-experiment
// decoder filled before, with the same results (FuzzHandDecoders).

var betaMessagesScratch scratch[betaMessageIn]
var betaBlocksScratch scratch[betaBlock]

var betaRequestNames = fields("model", "system", "messages", "tools", "tool_choice", "max_tokens", "temperature",
	"top_p", "top_k", "stop_sequences", "stream", "thinking", "output_config", "metadata", "service_tier",
	"mcp_servers", "container")

func (in *betaRequestIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, betaRequestNames) {
		case 0:
			return d.str(&in.Model)
		case 1:
			return d.raw(&in.System)
		case 2:
			out := in.Messages[:0]
			null, err := d.array(func(int) error {
				out = append(out, betaMessageIn{})
				return out[len(out)-1].read(d, &in.blocks)
			})
			in.Messages = sliceResult(out, null)
			return err
		case 3:
			return d.rawList(&in.Tools)
		case 4:
			return d.raw(&in.ToolChoice)
		case 5:
			return d.intPtr(&in.MaxTokens)
		case 6:
			return d.floatPtr(&in.Temperature)
		case 7:
			return d.floatPtr(&in.TopP)
		case 8:
			return d.intPtr(&in.TopK)
		case 9:
			return d.strs(&in.StopSequences)
		case 10:
			return d.boolean(&in.Stream)
		case 11:
			if ok, err := want(d, &in.Thinking); !ok || err != nil {
				return err
			}
			return in.Thinking.read(d)
		case 12:
			if ok, err := want(d, &in.OutputConfig); !ok || err != nil {
				return err
			}
			return in.OutputConfig.read(d)
		case 13:
			if ok, err := want(d, &in.Metadata); !ok || err != nil {
				return err
			}
			return in.Metadata.read(d)
		case 14:
			return d.str(&in.ServiceTier)
		case 15:
			return d.raw(&in.MCPServers)
		case 16:
			return d.raw(&in.Container)
		}
		return d.skip()
	})
	if null {
		*in = betaRequestIn{}
	}
	return err
}

var roleContentNames = fields("role", "content")

// read reads a message, its content included (m.pre), the content blocks into *blocks.
func (m *betaMessageIn) read(d *jr, blocks *[]betaBlock) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, roleContentNames) {
		case 0:
			return d.str(&m.Role)
		case 1:
			return m.pre.readFrom(d, blocks, &m.Content)
		}
		return d.skip()
	})
	if null {
		*m = betaMessageIn{}
	}
	return err
}

var betaThinkingNames = fields("type", "budget_tokens")

func (t *betaThinkingIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, betaThinkingNames) {
		case 0:
			return d.str(&t.Type)
		case 1:
			return d.integer(&t.BudgetTokens)
		}
		return d.skip()
	})
	if null {
		*t = betaThinkingIn{}
	}
	return err
}

var betaOutputConfigNames = fields("effort", "format")
var typeSchemaNames = fields("type", "schema")

func (c *betaOutputConfig) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, betaOutputConfigNames) {
		case 0:
			return d.str(&c.Effort)
		case 1:
			if ok, err := want(d, &c.Format); !ok || err != nil {
				return err
			}
			f := c.Format
			null, err := d.object(func(name string) error {
				switch fieldOf(name, typeSchemaNames) {
				case 0:
					return d.str(&f.Type)
				case 1:
					return d.raw(&f.Schema)
				}
				return d.skip()
			})
			if null {
				*f = betaFormatIn{}
			}
			return err
		}
		return d.skip()
	})
	if null {
		*c = betaOutputConfig{}
	}
	return err
}

var betaMetadataNames = fields("user_id")

func (m *betaMetadata) read(d *jr) error {
	null, err := d.object(func(name string) error {
		if fieldOf(name, betaMetadataNames) == 0 {
			return d.str(&m.UserID)
		}
		return d.skip()
	})
	if null {
		*m = betaMetadata{}
	}
	return err
}

var betaToolNames = fields("type", "name", "description", "input_schema")

func (t *betaToolIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, betaToolNames) {
		case 0:
			return d.str(&t.Type)
		case 1:
			return d.str(&t.Name)
		case 2:
			return d.str(&t.Description)
		case 3:
			return d.raw(&t.InputSchema)
		}
		return d.skip()
	})
	if null {
		*t = betaToolIn{}
	}
	return err
}

var betaToolChoiceNames = fields("type", "name", "disable_parallel_tool_use")

func (t *betaToolChoiceIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, betaToolChoiceNames) {
		case 0:
			return d.str(&t.Type)
		case 1:
			return d.str(&t.Name)
		case 2:
			return d.boolean(&t.DisableParallelToolUse)
		}
		return d.skip()
	})
	if null {
		*t = betaToolChoiceIn{}
	}
	return err
}

// readBetaBlocks reads content blocks into *dst (reused storage).
func readBetaBlocks(d *jr, dst *[]betaBlock) error {
	out := (*dst)[:0]
	null, err := d.array(func(int) error {
		out = append(out, betaBlock{})
		return out[len(out)-1].read(d)
	})
	*dst = sliceResult(out, null)
	return err
}

var betaBlockNames = fields("type", "text", "source", "id", "name", "input", "tool_use_id", "content", "is_error",
	"thinking", "signature", "data", "title")
var betaSourceNames = fields("type", "media_type", "data", "url")

func (b *betaBlock) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, betaBlockNames) {
		case 0:
			return d.str(&b.Type)
		case 1:
			return d.str(&b.Text)
		case 2:
			if ok, err := want(d, &b.Source); !ok || err != nil {
				return err
			}
			s := b.Source
			null, err := d.object(func(name string) error {
				switch fieldOf(name, betaSourceNames) {
				case 0:
					return d.str(&s.Type)
				case 1:
					return d.str(&s.MediaType)
				case 2:
					return d.str(&s.Data)
				case 3:
					return d.str(&s.URL)
				}
				return d.skip()
			})
			if null {
				*s = betaSource{}
			}
			return err
		case 3:
			return d.str(&b.ID)
		case 4:
			return d.str(&b.Name)
		case 5:
			return d.raw(&b.Input)
		case 6:
			return d.str(&b.ToolUseID)
		case 7:
			return d.raw(&b.Content)
		case 8:
			return d.boolean(&b.IsError)
		case 9:
			return d.strPtr(&b.Thinking)
		case 10:
			return d.strPtr(&b.Signature)
		case 11:
			return d.str(&b.Data)
		case 12:
			return d.str(&b.Title)
		}
		return d.skip()
	})
	if null {
		*b = betaBlock{}
	}
	return err
}

// readFrom reads a message's content (also as raw, into *raw) in the body's one pass: a string, or blocks
// appended to *blocks. An error that is not in the body's syntax (a value of the wrong kind) is kept in
// c.err and the content skipped: the caller reports it when it converts the message, where it decoded the
// content kept raw before; a syntax error is the body's, returned at once as before.
func (c *betaContent) readFrom(d *jr, blocks *[]betaBlock, raw *json.RawMessage) error {
	d.ws()
	start, depth, n := d.i, d.depth, len(*blocks)
	*c = betaContent{read: true}
	var err error
	if d.peek() == '"' {
		c.isText = true
		err = d.str(&c.text)
	} else {
		out := *blocks
		var null bool
		null, err = d.array(func(int) error {
			out = append(out, betaBlock{})
			return out[len(out)-1].read(d)
		})
		*blocks = out
		if !null {
			c.blocks = out[n:len(out):len(out)]
		}
	}
	if err != nil {
		d.i, d.depth = start, depth
		if err := d.skip(); err != nil {
			return err
		}
		*c = betaContent{read: true, err: err}
	}
	*raw = json.RawMessage(d.b[start:d.i:d.i])
	return nil
}
