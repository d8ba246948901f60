package alpha

import (
	"encoding/json"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// Hand-written decoders of the alpha responses request (see jr): each fills the struct the go-json-experiment
// decoder filled before, with the same results (FuzzHandDecoders).

var (
	respItemsScratch jsonkit.Scratch[RespItem]
	respPartsScratch jsonkit.Scratch[RespContentPart]
)

var RespRequestNames = jsonkit.Fields("model", "instructions", "input", "tools", "tool_choice", "parallel_tool_calls",
	"max_output_tokens", "temperature", "top_p", "reasoning", "text", "stream", "service_tier", "user",
	"safety_identifier", "previous_response_id", "conversation", "background", "prompt", "top_logprobs")

var respReasoningNames = jsonkit.Fields("effort", "summary")

var respTextNames = jsonkit.Fields("format")

var respFormatNames = jsonkit.Fields("type", "name", "schema", "strict")

func (in *RespRequestIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch jsonkit.FieldOf(name, RespRequestNames) {
		case 0:
			return d.Str(&in.Model)
		case 1:
			return d.Raw(&in.Instructions)
		case 2:
			return in.InputRead.readFrom(d, &in.Input)
		case 3:
			return d.RawList(&in.Tools)
		case 4:
			return d.Raw(&in.ToolChoice)
		case 5:
			return d.BoolPtr(&in.ParallelToolCalls)
		case 6:
			return d.IntPtr(&in.MaxOutputTokens)
		case 7:
			return d.FloatPtr(&in.Temperature)
		case 8:
			return d.FloatPtr(&in.TopP)
		case 9:
			if ok, err := canon.Want(d, &in.Reasoning); !ok || err != nil {
				return err
			}
			rs := in.Reasoning
			null, err := d.Object(func(name string) error {
				switch jsonkit.FieldOf(name, respReasoningNames) {
				case 0:
					return d.Str(&rs.Effort)
				case 1:
					return d.Str(&rs.Summary)
				}
				return d.Skip()
			})
			if null {
				*rs = respReasoningIn{}
			}
			return err
		case 10:
			if ok, err := canon.Want(d, &in.Text); !ok || err != nil {
				return err
			}
			return in.Text.Read(d)
		case 11:
			return d.Boolean(&in.Stream)
		case 12:
			return d.Str(&in.ServiceTier)
		case 13:
			return d.Str(&in.User)
		case 14:
			return d.Str(&in.SafetyIdentifier)
		case 15:
			return d.Str(&in.PreviousResponseID)
		case 16:
			return d.Raw(&in.Conversation)
		case 17:
			return d.BoolPtr(&in.Background)
		case 18:
			return d.Raw(&in.Prompt)
		case 19:
			return d.IntPtr(&in.TopLogprobs)
		}
		return d.Skip()
	})
	if null {
		*in = RespRequestIn{}
	}
	return err
}

func (t *respTextIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		if jsonkit.FieldOf(name, respTextNames) != 0 {
			return d.Skip()
		}
		if ok, err := canon.Want(d, &t.Format); !ok || err != nil {
			return err
		}
		f := t.Format
		null, err := d.Object(func(name string) error {
			switch jsonkit.FieldOf(name, respFormatNames) {
			case 0:
				return d.Str(&f.Type)
			case 1:
				return d.Str(&f.Name)
			case 2:
				return d.Raw(&f.Schema)
			case 3:
				return d.BoolPtr(&f.Strict)
			}
			return d.Skip()
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

var respToolNames = jsonkit.Fields("type", "name", "description", "parameters", "strict")

func (t *RespToolIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch jsonkit.FieldOf(name, respToolNames) {
		case 0:
			return d.Str(&t.Type)
		case 1:
			return d.Str(&t.Name)
		case 2:
			return d.Str(&t.Description)
		case 3:
			return d.Raw(&t.Parameters)
		case 4:
			return d.BoolPtr(&t.Strict)
		}
		return d.Skip()
	})
	if null {
		*t = RespToolIn{}
	}
	return err
}

var RespItemNames = jsonkit.Fields("type", "id", "role", "status", "content", "call_id", "name", "arguments", "output",
	"summary", "encrypted_content")

// ReadRespItems reads the input items.
func ReadRespItems(d *jsonkit.Reader, dst *[]RespItem) error { return ReadRespItemsIn(d, dst, nil) }

// ReadRespItemsIn reads the input items; with parts not nil it also reads each item's content and output in
// the same pass (respValueRead, their parts appended to *parts), keeping an error that is not the body's
// syntax for respInputToIR to report where it read them from the raw value before.
func ReadRespItemsIn(d *jsonkit.Reader, dst *[]RespItem, parts *[]RespContentPart) error {
	out := (*dst)[:0]
	null, err := d.Array(func(int) error {
		out = append(out, RespItem{})
		it := &out[len(out)-1]
		null, err := d.Object(func(name string) (err error) {
			switch jsonkit.FieldOf(name, RespItemNames) {
			case 0:
				return d.Str(&it.Type)
			case 1:
				return d.Str(&it.ID)
			case 2:
				return d.Str(&it.Role)
			case 3:
				return d.Str(&it.Status)
			case 4:
				if parts == nil {
					return d.Raw(&it.Content)
				}
				start, depth := d.Mark()
				it.ContentRead.err, err = d.Kept(start, depth, it.ContentRead.readFrom(d, parts), &it.Content)
				return err
			case 5:
				return d.Str(&it.CallID)
			case 6:
				return d.Str(&it.Name)
			case 7:
				if parts != nil && it.Arguments == nil {
					it.Arguments = &it.Args // no allocation per call (items are only appended after this one is read)
				}
				return d.StrPtr(&it.Arguments)
			case 8:
				if parts == nil {
					return d.Raw(&it.Output)
				}
				start, depth := d.Mark()
				it.OutputRead.err, err = d.Kept(start, depth, it.OutputRead.readFrom(d, parts), &it.Output)
				return err
			case 9:
				return d.Raw(&it.Summary)
			case 10:
				return d.Str(&it.EncryptedContent)
			}
			return d.Skip()
		})
		if null {
			*it = RespItem{}
		}
		return err
	})
	*dst = canon.SliceResult(out, null)
	return err
}

var RespContentNames = jsonkit.Fields("type", "text", "refusal", "image_url", "file_id", "detail", "file_data", "file_url",
	"filename", "annotations")

// ReadRespContent reads a message's content parts into *dst (reused storage).
func ReadRespContent(d *jsonkit.Reader, dst *[]RespContentPart) error {
	*dst = (*dst)[:0]
	null, err := appendRespContent(d, dst)
	*dst = canon.SliceResult(*dst, null)
	return err
}

// readFrom reads a content or output value in the body's one pass: its text when it is a string, else its parts
// appended to *parts (v records where).
func (v *RespValueRead) readFrom(d *jsonkit.Reader, parts *[]RespContentPart) (err error) {
	*v = RespValueRead{read: true}
	if d.Peek() == '"' {
		v.isText = true
		v.text, err = d.StrTok()
		return err
	}
	v.lo = len(*parts)
	_, err = appendRespContent(d, parts)
	v.hi = len(*parts)
	return err
}

// appendRespContent reads content parts, appended to *dst, and reports a null.
func appendRespContent(d *jsonkit.Reader, dst *[]RespContentPart) (null bool, err error) {
	out := *dst
	null, err = d.Array(func(int) error {
		out = append(out, RespContentPart{})
		p := &out[len(out)-1]
		null, err := d.Object(func(name string) error {
			switch jsonkit.FieldOf(name, RespContentNames) {
			case 0:
				return d.Str(&p.Type)
			case 1:
				return d.Str(&p.Text)
			case 2:
				return d.Str(&p.Refusal)
			case 3:
				return d.Str(&p.ImageURL)
			case 4:
				return d.Str(&p.FileID)
			case 5:
				return d.Str(&p.Detail)
			case 6:
				return d.Str(&p.FileData)
			case 7:
				return d.Str(&p.FileURL)
			case 8:
				return d.Str(&p.Filename)
			case 9:
				return d.Raw(&p.Annotations)
			}
			return d.Skip()
		})
		if null {
			*p = RespContentPart{}
		}
		return err
	})
	*dst = out
	return null, err
}

var textNames = jsonkit.Fields("text")

// ReadRespSummary reads a reasoning item's summary; on a value of the wrong kind it stops, keeping the parts
// read so far (the caller uses them, as it did with the go-json-experiment decoder).
func ReadRespSummary(d *jsonkit.Reader, dst *[]respSummaryIn) error {
	if k := d.Peek(); k != '[' && k != 'n' {
		return d.Mismatch(k, "array")
	}
	out := (*dst)[:0]
	null, err := d.Array(func(int) error {
		out = append(out, respSummaryIn{})
		p := &out[len(out)-1]
		null, err := d.Object(func(name string) error {
			if jsonkit.FieldOf(name, textNames) == 0 {
				return d.Str(&p.Text)
			}
			return d.Skip()
		})
		if null {
			*p = respSummaryIn{}
		}
		return err
	})
	*dst = canon.SliceResult(out, null)
	return err
}

// readFrom reads the input (also as raw, into *raw) in the body's one pass: a string, or items into r.items
// (reused). An error that is not in the body's syntax (a value of the wrong kind) is kept in r.err and the
// input skipped: respInputToIR reports it where it decoded the input kept raw before; a syntax error is
// the body's, returned at once as before.
func (r *RespInputRead) readFrom(d *jsonkit.Reader, raw *json.RawMessage) error {
	d.Ws()
	start, depth := d.I, d.Depth
	*r = RespInputRead{read: true, items: r.items[:0], parts: r.parts[:0]}
	var err error
	if d.Peek() == '"' {
		r.isText = true
		r.text, err = d.StrTok()
	} else {
		err = ReadRespItemsIn(d, &r.items, &r.parts)
	}
	if err != nil {
		d.I, d.Depth = start, depth
		if err := d.Skip(); err != nil {
			return err
		}
		*r = RespInputRead{read: true, items: r.items[:0], parts: r.parts[:0], err: err}
	}
	*raw = json.RawMessage(d.B[start:d.I:d.I])
	return nil
}
