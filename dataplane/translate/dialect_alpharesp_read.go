package translate

import "encoding/json"

// Hand-written decoders of the alpha responses request (see jr): each fills the struct the go-json-experiment
// decoder filled before, with the same results (FuzzHandDecoders).

var (
	respItemsScratch scratch[respItem]
	respPartsScratch scratch[respContentPart]
)

var respRequestNames = fields("model", "instructions", "input", "tools", "tool_choice", "parallel_tool_calls",
	"max_output_tokens", "temperature", "top_p", "reasoning", "text", "stream", "service_tier", "user",
	"safety_identifier", "previous_response_id", "conversation", "background", "prompt", "top_logprobs")
var respReasoningNames = fields("effort", "summary")
var respTextNames = fields("format")
var respFormatNames = fields("type", "name", "schema", "strict")

func (in *respRequestIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, respRequestNames) {
		case 0:
			return d.str(&in.Model)
		case 1:
			return d.raw(&in.Instructions)
		case 2:
			return in.input.readFrom(d, &in.Input)
		case 3:
			return d.rawList(&in.Tools)
		case 4:
			return d.raw(&in.ToolChoice)
		case 5:
			return d.boolPtr(&in.ParallelToolCalls)
		case 6:
			return d.intPtr(&in.MaxOutputTokens)
		case 7:
			return d.floatPtr(&in.Temperature)
		case 8:
			return d.floatPtr(&in.TopP)
		case 9:
			if ok, err := want(d, &in.Reasoning); !ok || err != nil {
				return err
			}
			rs := in.Reasoning
			null, err := d.object(func(name string) error {
				switch fieldOf(name, respReasoningNames) {
				case 0:
					return d.str(&rs.Effort)
				case 1:
					return d.str(&rs.Summary)
				}
				return d.skip()
			})
			if null {
				*rs = respReasoningIn{}
			}
			return err
		case 10:
			if ok, err := want(d, &in.Text); !ok || err != nil {
				return err
			}
			return in.Text.read(d)
		case 11:
			return d.boolean(&in.Stream)
		case 12:
			return d.str(&in.ServiceTier)
		case 13:
			return d.str(&in.User)
		case 14:
			return d.str(&in.SafetyIdentifier)
		case 15:
			return d.str(&in.PreviousResponseID)
		case 16:
			return d.raw(&in.Conversation)
		case 17:
			return d.boolPtr(&in.Background)
		case 18:
			return d.raw(&in.Prompt)
		case 19:
			return d.intPtr(&in.TopLogprobs)
		}
		return d.skip()
	})
	if null {
		*in = respRequestIn{}
	}
	return err
}

func (t *respTextIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		if fieldOf(name, respTextNames) != 0 {
			return d.skip()
		}
		if ok, err := want(d, &t.Format); !ok || err != nil {
			return err
		}
		f := t.Format
		null, err := d.object(func(name string) error {
			switch fieldOf(name, respFormatNames) {
			case 0:
				return d.str(&f.Type)
			case 1:
				return d.str(&f.Name)
			case 2:
				return d.raw(&f.Schema)
			case 3:
				return d.boolPtr(&f.Strict)
			}
			return d.skip()
		})
		if null {
			*f = respFormatIn{}
		}
		return err
	})
	if null {
		*t = respTextIn{}
	}
	return err
}

var respToolNames = fields("type", "name", "description", "parameters", "strict")

func (t *respToolIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, respToolNames) {
		case 0:
			return d.str(&t.Type)
		case 1:
			return d.str(&t.Name)
		case 2:
			return d.str(&t.Description)
		case 3:
			return d.raw(&t.Parameters)
		case 4:
			return d.boolPtr(&t.Strict)
		}
		return d.skip()
	})
	if null {
		*t = respToolIn{}
	}
	return err
}

var respItemNames = fields("type", "id", "role", "status", "content", "call_id", "name", "arguments", "output",
	"summary", "encrypted_content")

// readRespItems reads the input items.
func readRespItems(d *jr, dst *[]respItem) error { return readRespItemsIn(d, dst, nil) }

// readRespItemsIn reads the input items; with parts not nil it also reads each item's content and output in
// the same pass (respValueRead, their parts appended to *parts), keeping an error that is not the body's
// syntax for respInputToIR to report where it read them from the raw value before.
func readRespItemsIn(d *jr, dst *[]respItem, parts *[]respContentPart) error {
	out := (*dst)[:0]
	null, err := d.array(func(int) error {
		out = append(out, respItem{})
		it := &out[len(out)-1]
		null, err := d.object(func(name string) (err error) {
			switch fieldOf(name, respItemNames) {
			case 0:
				return d.str(&it.Type)
			case 1:
				return d.str(&it.ID)
			case 2:
				return d.str(&it.Role)
			case 3:
				return d.str(&it.Status)
			case 4:
				if parts == nil {
					return d.raw(&it.Content)
				}
				start, depth := d.mark()
				it.content.err, err = d.kept(start, depth, it.content.readFrom(d, parts), &it.Content)
				return err
			case 5:
				return d.str(&it.CallID)
			case 6:
				return d.str(&it.Name)
			case 7:
				if parts != nil && it.Arguments == nil {
					it.Arguments = &it.args // no allocation per call (items are only appended after this one is read)
				}
				return d.strPtr(&it.Arguments)
			case 8:
				if parts == nil {
					return d.raw(&it.Output)
				}
				start, depth := d.mark()
				it.output.err, err = d.kept(start, depth, it.output.readFrom(d, parts), &it.Output)
				return err
			case 9:
				return d.raw(&it.Summary)
			case 10:
				return d.str(&it.EncryptedContent)
			}
			return d.skip()
		})
		if null {
			*it = respItem{}
		}
		return err
	})
	*dst = sliceResult(out, null)
	return err
}

var respContentNames = fields("type", "text", "refusal", "image_url", "file_id", "detail", "file_data", "file_url",
	"filename", "annotations")

// readRespContent reads a message's content parts into *dst (reused storage).
func readRespContent(d *jr, dst *[]respContentPart) error {
	*dst = (*dst)[:0]
	null, err := appendRespContent(d, dst)
	*dst = sliceResult(*dst, null)
	return err
}

// readFrom reads a content or output value in the body's one pass: its text when it is a string, else its parts
// appended to *parts (v records where).
func (v *respValueRead) readFrom(d *jr, parts *[]respContentPart) (err error) {
	*v = respValueRead{read: true}
	if d.peek() == '"' {
		v.isText = true
		v.text, err = d.strTok()
		return err
	}
	v.lo = len(*parts)
	_, err = appendRespContent(d, parts)
	v.hi = len(*parts)
	return err
}

// appendRespContent reads content parts, appended to *dst, and reports a null.
func appendRespContent(d *jr, dst *[]respContentPart) (null bool, err error) {
	out := *dst
	null, err = d.array(func(int) error {
		out = append(out, respContentPart{})
		p := &out[len(out)-1]
		null, err := d.object(func(name string) error {
			switch fieldOf(name, respContentNames) {
			case 0:
				return d.str(&p.Type)
			case 1:
				return d.str(&p.Text)
			case 2:
				return d.str(&p.Refusal)
			case 3:
				return d.str(&p.ImageURL)
			case 4:
				return d.str(&p.FileID)
			case 5:
				return d.str(&p.Detail)
			case 6:
				return d.str(&p.FileData)
			case 7:
				return d.str(&p.FileURL)
			case 8:
				return d.str(&p.Filename)
			case 9:
				return d.raw(&p.Annotations)
			}
			return d.skip()
		})
		if null {
			*p = respContentPart{}
		}
		return err
	})
	*dst = out
	return null, err
}

var textNames = fields("text")

// readRespSummary reads a reasoning item's summary; on a value of the wrong kind it stops, keeping the parts
// read so far (the caller uses them, as it did with the go-json-experiment decoder).
func readRespSummary(d *jr, dst *[]respSummaryIn) error {
	if k := d.peek(); k != '[' && k != 'n' {
		return d.mismatch(k, "array")
	}
	out := (*dst)[:0]
	null, err := d.array(func(int) error {
		out = append(out, respSummaryIn{})
		p := &out[len(out)-1]
		null, err := d.object(func(name string) error {
			if fieldOf(name, textNames) == 0 {
				return d.str(&p.Text)
			}
			return d.skip()
		})
		if null {
			*p = respSummaryIn{}
		}
		return err
	})
	*dst = sliceResult(out, null)
	return err
}

// readFrom reads the input (also as raw, into *raw) in the body's one pass: a string, or items into r.items
// (reused). An error that is not in the body's syntax (a value of the wrong kind) is kept in r.err and the
// input skipped: respInputToIR reports it where it decoded the input kept raw before; a syntax error is
// the body's, returned at once as before.
func (r *respInputRead) readFrom(d *jr, raw *json.RawMessage) error {
	d.ws()
	start, depth := d.i, d.depth
	*r = respInputRead{read: true, items: r.items[:0], parts: r.parts[:0]}
	var err error
	if d.peek() == '"' {
		r.isText = true
		r.text, err = d.strTok()
	} else {
		err = readRespItemsIn(d, &r.items, &r.parts)
	}
	if err != nil {
		d.i, d.depth = start, depth
		if err := d.skip(); err != nil {
			return err
		}
		*r = respInputRead{read: true, items: r.items[:0], parts: r.parts[:0], err: err}
	}
	*raw = json.RawMessage(d.b[start:d.i:d.i])
	return nil
}
