package alpha

import (
	"encoding/json"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// Hand-written decoders of the alpha responses request (see Reader): each fills the struct the go-json-experiment
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
		switch RespRequestNames.Match(name) {
		case "model":
			return d.Str(&in.Model)
		case "instructions":
			return d.Raw(&in.Instructions)
		case "input":
			return in.InputRead.readFrom(d, &in.Input)
		case "tools":
			return d.RawList(&in.Tools)
		case "tool_choice":
			return d.Raw(&in.ToolChoice)
		case "parallel_tool_calls":
			return d.BoolPtr(&in.ParallelToolCalls)
		case "max_output_tokens":
			return d.IntPtr(&in.MaxOutputTokens)
		case "temperature":
			return d.FloatPtr(&in.Temperature)
		case "top_p":
			return d.FloatPtr(&in.TopP)
		case "reasoning":
			if ok, err := jsonkit.Want(d, &in.Reasoning); !ok || err != nil {
				return err
			}
			rs := in.Reasoning
			null, err := d.Object(func(name string) error {
				switch respReasoningNames.Match(name) {
				case "effort":
					return d.Str(&rs.Effort)
				case "summary":
					return d.Str(&rs.Summary)
				}
				return d.Skip()
			})
			if null {
				*rs = respReasoningIn{}
			}
			return err
		case "text":
			if ok, err := jsonkit.Want(d, &in.Text); !ok || err != nil {
				return err
			}
			return in.Text.Read(d)
		case "stream":
			return d.Boolean(&in.Stream)
		case "service_tier":
			return d.Str(&in.ServiceTier)
		case "user":
			return d.Str(&in.User)
		case "safety_identifier":
			return d.Str(&in.SafetyIdentifier)
		case "previous_response_id":
			return d.Str(&in.PreviousResponseID)
		case "conversation":
			return d.Raw(&in.Conversation)
		case "background":
			return d.BoolPtr(&in.Background)
		case "prompt":
			return d.Raw(&in.Prompt)
		case "top_logprobs":
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
		if respTextNames.Match(name) != "format" {
			return d.Skip()
		}
		if ok, err := jsonkit.Want(d, &t.Format); !ok || err != nil {
			return err
		}
		f := t.Format
		null, err := d.Object(func(name string) error {
			switch respFormatNames.Match(name) {
			case "type":
				return d.Str(&f.Type)
			case "name":
				return d.Str(&f.Name)
			case "schema":
				return d.Raw(&f.Schema)
			case "strict":
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
		switch respToolNames.Match(name) {
		case "type":
			return d.Str(&t.Type)
		case "name":
			return d.Str(&t.Name)
		case "description":
			return d.Str(&t.Description)
		case "parameters":
			return d.Raw(&t.Parameters)
		case "strict":
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
// the same pass (RespValueRead, their parts appended to *parts), keeping an error that is not the body's
// syntax for respInputToIR to report where it read them from the raw value before.
func ReadRespItemsIn(d *jsonkit.Reader, dst *[]RespItem, parts *[]RespContentPart) error {
	out := (*dst)[:0]
	null, err := d.Array(func(int) error {
		out = append(out, RespItem{})
		it := &out[len(out)-1]
		null, err := d.Object(func(name string) (err error) {
			switch RespItemNames.Match(name) {
			case "type":
				return d.Str(&it.Type)
			case "id":
				return d.Str(&it.ID)
			case "role":
				return d.Str(&it.Role)
			case "status":
				return d.Str(&it.Status)
			case "content":
				if parts == nil {
					return d.Raw(&it.Content)
				}
				start, depth := d.Mark()
				it.ContentRead.err, err = d.Kept(start, depth, it.ContentRead.readFrom(d, parts), &it.Content)
				return err
			case "call_id":
				return d.Str(&it.CallID)
			case "name":
				return d.Str(&it.Name)
			case "arguments":
				if parts != nil && it.Arguments == nil {
					it.Arguments = &it.Args // no allocation per call (items are only appended after this one is read)
				}
				return d.StrPtr(&it.Arguments)
			case "output":
				if parts == nil {
					return d.Raw(&it.Output)
				}
				start, depth := d.Mark()
				it.OutputRead.err, err = d.Kept(start, depth, it.OutputRead.readFrom(d, parts), &it.Output)
				return err
			case "summary":
				return d.Raw(&it.Summary)
			case "encrypted_content":
				return d.Str(&it.EncryptedContent)
			}
			return d.Skip()
		})
		if null {
			*it = RespItem{}
		}
		return err
	})
	*dst = jsonkit.SliceResult(out, null)
	return err
}

var RespContentNames = jsonkit.Fields("type", "text", "refusal", "image_url", "file_id", "detail", "file_data", "file_url",
	"filename", "annotations")

// ReadRespContent reads a message's content parts into *dst (reused storage).
func ReadRespContent(d *jsonkit.Reader, dst *[]RespContentPart) error {
	*dst = (*dst)[:0]
	null, err := appendRespContent(d, dst)
	*dst = jsonkit.SliceResult(*dst, null)
	return err
}

// readFrom reads a content or output value in the body's one pass: its text when it is a string, else its parts
// appended to *parts (v records where).
func (v *RespValueRead) readFrom(d *jsonkit.Reader, parts *[]RespContentPart) (err error) {
	*v = RespValueRead{read: true}
	if d.Peek() == jsonkit.KindString {
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
			switch RespContentNames.Match(name) {
			case "type":
				return d.Str(&p.Type)
			case "text":
				return d.Str(&p.Text)
			case "refusal":
				return d.Str(&p.Refusal)
			case "image_url":
				return d.Str(&p.ImageURL)
			case "file_id":
				return d.Str(&p.FileID)
			case "detail":
				return d.Str(&p.Detail)
			case "file_data":
				return d.Str(&p.FileData)
			case "file_url":
				return d.Str(&p.FileURL)
			case "filename":
				return d.Str(&p.Filename)
			case "annotations":
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
	if k := d.Peek(); k != jsonkit.KindArray && k != jsonkit.KindNull {
		return d.Mismatch(k, "array")
	}
	out := (*dst)[:0]
	null, err := d.Array(func(int) error {
		out = append(out, respSummaryIn{})
		p := &out[len(out)-1]
		null, err := d.Object(func(name string) error {
			if textNames.Match(name) == "text" {
				return d.Str(&p.Text)
			}
			return d.Skip()
		})
		if null {
			*p = respSummaryIn{}
		}
		return err
	})
	*dst = jsonkit.SliceResult(out, null)
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
	if d.Peek() == jsonkit.KindString {
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
