package canon

import (
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

var toolMemberNames = jsonkit.Fields("name", "description", "parameters", "strict")

// Read decodes a function tool (alpha chat's function, alpha responses' tool).
func (t *Tool) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch toolMemberNames.Match(name) {
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
		*t = Tool{}
	}
	return err
}

// textPartIn is a {type, text} part of content given as text (RawText).
type textPartIn struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

var typeTextNames = jsonkit.Fields("type", "text")

// ReadTextParts reads an array of {type, text} parts.
func ReadTextParts(d *jsonkit.Reader, dst *[]textPartIn) error {
	out := (*dst)[:0]
	null, err := d.Array(func(int) error {
		out = append(out, textPartIn{})
		p := &out[len(out)-1]
		null, err := d.Object(func(name string) error {
			switch typeTextNames.Match(name) {
			case "type":
				return d.Str(&p.Type)
			case "text":
				return d.Str(&p.Text)
			}
			return d.Skip()
		})
		if null {
			*p = textPartIn{}
		}
		return err
	})
	*dst = jsonkit.SliceResult(out, null)
	return err
}
