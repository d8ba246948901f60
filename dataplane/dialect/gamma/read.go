package gamma

import (
	"encoding/json"

	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// Hand-written decoders of the gamma generateContent request (see Reader): each fills the struct the
// go-json-experiment decoder filled before, with the same results (FuzzHandDecoders).

var gammaContentsScratch jsonkit.Scratch[gammaContentIn]

var gammaPartsScratch jsonkit.Scratch[PartIn]

var gammaRequestNames = jsonkit.Fields("contents", "systemInstruction", "system_instruction", "tools", "toolConfig",
	"generationConfig", "generation_config", "cachedContent", "service_tier", "serviceTier")

func (in *RequestIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch gammaRequestNames.Match(name) {
		case "contents":
			return readGammaContentsIn(d, &in.Contents, &in.Parts)
		case "systemInstruction":
			if ok, err := jsonkit.Want(d, &in.SystemInstruction); !ok || err != nil {
				return err
			}
			return in.SystemInstruction.Read(d)
		case "system_instruction":
			if ok, err := jsonkit.Want(d, &in.SystemInstructionSnake); !ok || err != nil {
				return err
			}
			return in.SystemInstructionSnake.Read(d)
		case "tools":
			return d.RawList(&in.Tools)
		case "toolConfig":
			if ok, err := jsonkit.Want(d, &in.ToolConfig); !ok || err != nil {
				return err
			}
			return in.ToolConfig.Read(d)
		case "generationConfig":
			if ok, err := jsonkit.Want(d, &in.GenerationConfig); !ok || err != nil {
				return err
			}
			return in.GenerationConfig.Read(d)
		case "generation_config":
			if ok, err := jsonkit.Want(d, &in.GenerationConfigSnake); !ok || err != nil {
				return err
			}
			return in.GenerationConfigSnake.Read(d)
		case "cachedContent":
			return d.Str(&in.CachedContent)
		case "service_tier":
			return d.Str(&in.ServiceTier)
		case "serviceTier":
			return d.Str(&in.ServiceTierCamel)
		}
		return d.Skip()
	})
	if null {
		*in = RequestIn{}
	}
	return err
}

var gammaContentInNames = jsonkit.Fields("role", "parts")

// readGammaContentsIn reads the contents, their parts included (gammaContentIn.pre), into *parts.
func readGammaContentsIn(d *jsonkit.Reader, dst *[]gammaContentIn, parts *[]PartIn) error {
	out := (*dst)[:0]
	null, err := d.Array(func(int) error {
		out = append(out, gammaContentIn{})
		c := &out[len(out)-1]
		null, err := d.Object(func(name string) error {
			switch gammaContentInNames.Match(name) {
			case "role":
				return d.Str(&c.Role)
			case "parts":
				return c.Pre.readFrom(d, parts, &c.Parts)
			}
			return d.Skip()
		})
		if null {
			*c = gammaContentIn{}
		}
		return err
	})
	*dst = jsonkit.SliceResult(out, null)
	return err
}

var gammaContentNames = jsonkit.Fields("role", "parts")

func (c *Content) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch gammaContentNames.Match(name) {
		case "role":
			return d.Str(&c.Role)
		case "parts":
			out := c.Parts[:0]
			null, err := d.Array(func(int) error {
				out = append(out, Part{})
				return out[len(out)-1].Read(d)
			})
			c.Parts = jsonkit.SliceResult(out, null)
			return err
		}
		return d.Skip()
	})
	if null {
		*c = Content{}
	}
	return err
}

var PartNames = jsonkit.Fields("text", "thought", "inlineData", "fileData", "functionCall", "functionResponse",
	"thoughtSignature", "executableCode", "codeExecutionResult")

func (p *Part) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch PartNames.Match(name) {
		case "text":
			return d.StrPtr(&p.Text)
		case "thought":
			return d.Boolean(&p.Thought)
		case "inlineData":
			if ok, err := jsonkit.Want(d, &p.InlineData); !ok || err != nil {
				return err
			}
			return p.InlineData.Read(d)
		case "fileData":
			if ok, err := jsonkit.Want(d, &p.FileData); !ok || err != nil {
				return err
			}
			return p.FileData.Read(d)
		case "functionCall":
			if ok, err := jsonkit.Want(d, &p.FunctionCall); !ok || err != nil {
				return err
			}
			return p.FunctionCall.Read(d)
		case "functionResponse":
			if ok, err := jsonkit.Want(d, &p.FunctionResponse); !ok || err != nil {
				return err
			}
			return p.FunctionResponse.Read(d)
		case "thoughtSignature":
			return d.Str(&p.ThoughtSignature)
		case "executableCode":
			return d.Raw(&p.ExecutableCode)
		case "codeExecutionResult":
			return d.Raw(&p.CodeExecutionResult)
		}
		return d.Skip()
	})
	if null {
		*p = Part{}
	}
	return err
}

func (p *PartIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) (err error) {
		switch PartNames.Match(name) {
		case "text":
			return d.Raw(&p.Text)
		case "thought":
			return d.Boolean(&p.Thought)
		case "inlineData":
			if ok, err := jsonkit.Want(d, &p.InlineData); !ok || err != nil {
				return err
			}
			return p.InlineData.Read(d)
		case "fileData":
			if ok, err := jsonkit.Want(d, &p.FileData); !ok || err != nil {
				return err
			}
			return p.FileData.Read(d)
		case "functionCall":
			p.Fn.call = Call{} // a duplicate name: the last value counts
			start, depth := d.Mark()
			p.Fn.callErr, err = d.Kept(start, depth, p.Fn.call.Read(d), &p.FunctionCall)
			return err
		case "functionResponse":
			p.Fn.resp = FuncResp{}
			start, depth := d.Mark()
			p.Fn.respErr, err = d.Kept(start, depth, p.Fn.resp.Read(d), &p.FunctionResponse)
			return err
		case "thoughtSignature":
			return d.Str(&p.ThoughtSignature)
		case "executableCode":
			return d.Raw(&p.ExecutableCode)
		case "codeExecutionResult":
			return d.Raw(&p.CodeExecutionResult)
		}
		return d.Skip()
	})
	if null {
		*p = PartIn{}
	}
	return err
}

// ReadPartsIn reads one content's parts into *dst (reused storage).
func ReadPartsIn(d *jsonkit.Reader, dst *[]PartIn) error {
	out := (*dst)[:0]
	null, err := d.Array(func(int) error {
		out = append(out, PartIn{})
		return out[len(out)-1].Read(d)
	})
	*dst = jsonkit.SliceResult(out, null)
	return err
}

var gammaBlobNames = jsonkit.Fields("mimeType", "data", "fileUri")

func (b *gammaBlob) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch gammaBlobNames.Match(name) {
		case "mimeType":
			return d.Str(&b.MimeType)
		case "data":
			return d.Str(&b.Data)
		case "fileUri":
			return d.Str(&b.FileURI)
		}
		return d.Skip()
	})
	if null {
		*b = gammaBlob{}
	}
	return err
}

var CallNames = jsonkit.Fields("id", "name", "args")

func (c *Call) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch CallNames.Match(name) {
		case "id":
			return d.Str(&c.ID)
		case "name":
			return d.Str(&c.Name)
		case "args":
			return d.Raw(&c.Args)
		}
		return d.Skip()
	})
	if null {
		*c = Call{}
	}
	return err
}

var gammaFuncRespNames = jsonkit.Fields("id", "name", "response")

func (r *FuncResp) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch gammaFuncRespNames.Match(name) {
		case "id":
			return d.Str(&r.ID)
		case "name":
			return d.Str(&r.Name)
		case "response":
			return r.Result.readFrom(d, &r.Response)
		}
		return d.Skip()
	})
	if null {
		*r = FuncResp{}
	}
	return err
}

var gammaGenConfigNames = jsonkit.Fields("maxOutputTokens", "temperature", "topP", "topK", "stopSequences", "candidateCount",
	"seed", "presencePenalty", "frequencyPenalty", "responseMimeType", "responseSchema", "responseJsonSchema",
	"responseModalities", "thinkingConfig", "responseLogprobs", "logprobs", "speechConfig")

func (g *gammaGenConfig) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch gammaGenConfigNames.Match(name) {
		case "maxOutputTokens":
			return d.IntPtr(&g.MaxOutputTokens)
		case "temperature":
			return d.FloatPtr(&g.Temperature)
		case "topP":
			return d.FloatPtr(&g.TopP)
		case "topK":
			return d.IntPtr(&g.TopK)
		case "stopSequences":
			return d.Strs(&g.StopSequences)
		case "candidateCount":
			return d.IntPtr(&g.CandidateCount)
		case "seed":
			return d.Int64Ptr(&g.Seed)
		case "presencePenalty":
			return d.FloatPtr(&g.PresencePenalty)
		case "frequencyPenalty":
			return d.FloatPtr(&g.FrequencyPenalty)
		case "responseMimeType":
			return d.Str(&g.ResponseMimeType)
		case "responseSchema":
			return d.Raw(&g.ResponseSchema)
		case "responseJsonSchema":
			return d.Raw(&g.ResponseJSONSchema)
		case "responseModalities":
			return d.Strs(&g.ResponseModalities)
		case "thinkingConfig":
			if ok, err := jsonkit.Want(d, &g.ThinkingConfig); !ok || err != nil {
				return err
			}
			return g.ThinkingConfig.Read(d)
		case "responseLogprobs":
			return d.BoolPtr(&g.ResponseLogprobs)
		case "logprobs":
			return d.IntPtr(&g.Logprobs)
		case "speechConfig":
			return d.Raw(&g.SpeechConfig)
		}
		return d.Skip()
	})
	if null {
		*g = gammaGenConfig{}
	}
	return err
}

var gammaThinkingNames = jsonkit.Fields("thinkingBudget", "thinkingLevel", "includeThoughts")

func (t *gammaThinkingConfig) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch gammaThinkingNames.Match(name) {
		case "thinkingBudget":
			return d.IntPtr(&t.ThinkingBudget)
		case "thinkingLevel":
			return d.Str(&t.ThinkingLevel)
		case "includeThoughts":
			return d.Boolean(&t.IncludeThoughts)
		}
		return d.Skip()
	})
	if null {
		*t = gammaThinkingConfig{}
	}
	return err
}

var gammaToolConfigNames = jsonkit.Fields("functionCallingConfig")

var gammaFuncCallingNames = jsonkit.Fields("mode", "allowedFunctionNames")

func (t *gammaToolConfig) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		if gammaToolConfigNames.Match(name) != "functionCallingConfig" {
			return d.Skip()
		}
		fc := &t.FunctionCallingConfig
		null, err := d.Object(func(name string) error {
			switch gammaFuncCallingNames.Match(name) {
			case "mode":
				return d.Str(&fc.Mode)
			case "allowedFunctionNames":
				return d.Strs(&fc.AllowedFunctionNames)
			}
			return d.Skip()
		})
		if null {
			*fc = gammaFuncCallingConfig{}
		}
		return err
	})
	if null {
		*t = gammaToolConfig{}
	}
	return err
}

// ReadToolKeys reads one tools[] entry as an object (null is one without members) and returns the
// first member name other than functionDeclarations / function_declarations, matched exactly (found
// reports one).
func ReadToolKeys(d *jsonkit.Reader) (builtin string, found bool, err error) {
	_, err = d.Object(func(name string) error {
		if !found && name != "functionDeclarations" && name != "function_declarations" {
			builtin, found = name, true
		}
		return d.Skip()
	})
	return builtin, found, err
}

var gammaToolNames = jsonkit.Fields("functionDeclarations")

var gammaFuncDeclNames = jsonkit.Fields("name", "description", "parameters", "parametersJsonSchema")

// Read decodes a tool entry; on a value of the wrong kind it stops, keeping what it has read (the caller
// uses a partly read tool, as it did with the go-json-experiment decoder).
func (t *Tool) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		if gammaToolNames.Match(name) != "functionDeclarations" {
			return d.Skip()
		}
		if k := d.Peek(); k != jsonkit.KindArray && k != jsonkit.KindNull {
			return d.Mismatch(k, "array") // the declarations read before stay
		}
		out := t.FunctionDeclarations[:0]
		null, err := d.Array(func(int) error {
			out = append(out, gammaFuncDecl{})
			fd := &out[len(out)-1]
			null, err := d.Object(func(name string) error {
				switch gammaFuncDeclNames.Match(name) {
				case "name":
					return d.Str(&fd.Name)
				case "description":
					return d.Str(&fd.Description)
				case "parameters":
					return d.Raw(&fd.Parameters)
				case "parametersJsonSchema":
					return d.Raw(&fd.ParametersJSONSchema)
				}
				return d.Skip()
			})
			if null {
				*fd = gammaFuncDecl{}
			}
			return err
		})
		t.FunctionDeclarations = jsonkit.SliceResult(out, null)
		return err
	})
	if null {
		*t = Tool{}
	}
	return err
}

// Read decodes a functionResponse.response: "error" and "output" matched exactly, any other member sets
// Other; a value that is not an object (or null) fails.
func (m *ResultIn) Read(d *jsonkit.Reader) error {
	null, err := d.Object(func(name string) error {
		switch name {
		case "error":
			return d.Raw(&m.Error)
		case "output":
			return d.Raw(&m.Output)
		}
		m.Other = true
		return d.Skip()
	})
	if null {
		*m = ResultIn{}
	}
	return err
}

// readFrom reads a function response's response as raw (into *raw) and as ResultIn in one pass. A read
// that fails is not an error here (gammaResultPart keeps such a response as it is): the value is skipped
// from its start instead, so a syntax error is the one d.raw gave.
func (r *ResultRead) readFrom(d *jsonkit.Reader, raw *json.RawMessage) error {
	start, depth := d.Mark()
	*r = ResultRead{read: true}
	if err := r.in.Read(d); err != nil {
		r.in, r.failed = ResultIn{}, true
		d.I, d.Depth = start, depth
		if err := d.Skip(); err != nil {
			return err
		}
	}
	*raw = json.RawMessage(d.B[start:d.I:d.I])
	return nil
}

// readFrom reads a content's parts (also as raw, into *raw) in the body's one pass, appended to *parts.
// An error that is not in the body's syntax (a value of the wrong kind) is kept in r.err and the parts
// skipped: the caller reports it when it converts the content, where it decoded the parts kept raw
// before; a syntax error is the body's, returned at once as before.
func (r *PartsRead) readFrom(d *jsonkit.Reader, parts *[]PartIn, raw *json.RawMessage) error {
	d.Ws()
	start, depth, n := d.I, d.Depth, len(*parts)
	*r = PartsRead{read: true}
	out := *parts
	null, err := d.Array(func(int) error {
		out = append(out, PartIn{})
		return out[len(out)-1].Read(d)
	})
	*parts = out
	if !null {
		r.parts = out[n:len(out):len(out)]
	}
	if err != nil {
		d.I, d.Depth = start, depth
		if err := d.Skip(); err != nil {
			return err
		}
		*r = PartsRead{read: true, err: err}
	}
	*raw = json.RawMessage(d.B[start:d.I:d.I])
	return nil
}
