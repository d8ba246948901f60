package translate

import "encoding/json"

// Hand-written decoders of the gamma generateContent request (see jr): each fills the struct the
// go-json-experiment decoder filled before, with the same results (FuzzHandDecoders).

var gammaContentsScratch scratch[gammaContentIn]
var gammaPartsScratch scratch[gammaPartIn]

var gammaRequestNames = fields("contents", "systemInstruction", "system_instruction", "tools", "toolConfig",
	"generationConfig", "generation_config", "cachedContent", "service_tier", "serviceTier")

func (in *gammaRequestIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, gammaRequestNames) {
		case 0:
			return readGammaContentsIn(d, &in.Contents, &in.parts)
		case 1:
			if ok, err := want(d, &in.SystemInstruction); !ok || err != nil {
				return err
			}
			return in.SystemInstruction.read(d)
		case 2:
			if ok, err := want(d, &in.SystemInstructionSnake); !ok || err != nil {
				return err
			}
			return in.SystemInstructionSnake.read(d)
		case 3:
			return d.rawList(&in.Tools)
		case 4:
			if ok, err := want(d, &in.ToolConfig); !ok || err != nil {
				return err
			}
			return in.ToolConfig.read(d)
		case 5:
			if ok, err := want(d, &in.GenerationConfig); !ok || err != nil {
				return err
			}
			return in.GenerationConfig.read(d)
		case 6:
			if ok, err := want(d, &in.GenerationConfigSnake); !ok || err != nil {
				return err
			}
			return in.GenerationConfigSnake.read(d)
		case 7:
			return d.str(&in.CachedContent)
		case 8:
			return d.str(&in.ServiceTier)
		case 9:
			return d.str(&in.ServiceTierCamel)
		}
		return d.skip()
	})
	if null {
		*in = gammaRequestIn{}
	}
	return err
}

// want starts an optional object member: null sets *p nil and reports false; otherwise *p is allocated
// when nil, and the caller reads the member into it (merged into what a duplicate name set).
func want[T any](d *jr, p **T) (bool, error) {
	if d.peek() == 'n' {
		*p = nil
		return false, d.literal("null")
	}
	if *p == nil {
		*p = new(T)
	}
	return true, nil
}

var gammaContentInNames = fields("role", "parts")

// readGammaContentsIn reads the contents, their parts included (gammaContentIn.pre), into *parts.
func readGammaContentsIn(d *jr, dst *[]gammaContentIn, parts *[]gammaPartIn) error {
	out := (*dst)[:0]
	null, err := d.array(func(int) error {
		out = append(out, gammaContentIn{})
		c := &out[len(out)-1]
		null, err := d.object(func(name string) error {
			switch fieldOf(name, gammaContentInNames) {
			case 0:
				return d.str(&c.Role)
			case 1:
				return c.pre.readFrom(d, parts, &c.Parts)
			}
			return d.skip()
		})
		if null {
			*c = gammaContentIn{}
		}
		return err
	})
	*dst = sliceResult(out, null)
	return err
}

// sliceResult is what a slice member holds after an array (empty, not nil) or null (nil).
func sliceResult[T any](out []T, null bool) []T {
	if null {
		return nil
	}
	if out == nil {
		return []T{}
	}
	return out
}

var gammaContentNames = fields("role", "parts")

func (c *gammaContent) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, gammaContentNames) {
		case 0:
			return d.str(&c.Role)
		case 1:
			out := c.Parts[:0]
			null, err := d.array(func(int) error {
				out = append(out, gammaPart{})
				return out[len(out)-1].read(d)
			})
			c.Parts = sliceResult(out, null)
			return err
		}
		return d.skip()
	})
	if null {
		*c = gammaContent{}
	}
	return err
}

var gammaPartNames = fields("text", "thought", "inlineData", "fileData", "functionCall", "functionResponse",
	"thoughtSignature", "executableCode", "codeExecutionResult")

func (p *gammaPart) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, gammaPartNames) {
		case 0:
			return d.strPtr(&p.Text)
		case 1:
			return d.boolean(&p.Thought)
		case 2:
			if ok, err := want(d, &p.InlineData); !ok || err != nil {
				return err
			}
			return p.InlineData.read(d)
		case 3:
			if ok, err := want(d, &p.FileData); !ok || err != nil {
				return err
			}
			return p.FileData.read(d)
		case 4:
			if ok, err := want(d, &p.FunctionCall); !ok || err != nil {
				return err
			}
			return p.FunctionCall.read(d)
		case 5:
			if ok, err := want(d, &p.FunctionResponse); !ok || err != nil {
				return err
			}
			return p.FunctionResponse.read(d)
		case 6:
			return d.str(&p.ThoughtSignature)
		case 7:
			return d.raw(&p.ExecutableCode)
		case 8:
			return d.raw(&p.CodeExecutionResult)
		}
		return d.skip()
	})
	if null {
		*p = gammaPart{}
	}
	return err
}

func (p *gammaPartIn) read(d *jr) error {
	null, err := d.object(func(name string) (err error) {
		switch fieldOf(name, gammaPartNames) {
		case 0:
			return d.raw(&p.Text)
		case 1:
			return d.boolean(&p.Thought)
		case 2:
			if ok, err := want(d, &p.InlineData); !ok || err != nil {
				return err
			}
			return p.InlineData.read(d)
		case 3:
			if ok, err := want(d, &p.FileData); !ok || err != nil {
				return err
			}
			return p.FileData.read(d)
		case 4:
			p.fn.call = gammaCall{} // a duplicate name: the last value counts
			start, depth := d.mark()
			p.fn.callErr, err = d.kept(start, depth, p.fn.call.read(d), &p.FunctionCall)
			return err
		case 5:
			p.fn.resp = gammaFuncResp{}
			start, depth := d.mark()
			p.fn.respErr, err = d.kept(start, depth, p.fn.resp.read(d), &p.FunctionResponse)
			return err
		case 6:
			return d.str(&p.ThoughtSignature)
		case 7:
			return d.raw(&p.ExecutableCode)
		case 8:
			return d.raw(&p.CodeExecutionResult)
		}
		return d.skip()
	})
	if null {
		*p = gammaPartIn{}
	}
	return err
}

// readGammaPartsIn reads one content's parts into *dst (reused storage).
func readGammaPartsIn(d *jr, dst *[]gammaPartIn) error {
	out := (*dst)[:0]
	null, err := d.array(func(int) error {
		out = append(out, gammaPartIn{})
		return out[len(out)-1].read(d)
	})
	*dst = sliceResult(out, null)
	return err
}

var gammaBlobNames = fields("mimeType", "data", "fileUri")

func (b *gammaBlob) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, gammaBlobNames) {
		case 0:
			return d.str(&b.MimeType)
		case 1:
			return d.str(&b.Data)
		case 2:
			return d.str(&b.FileURI)
		}
		return d.skip()
	})
	if null {
		*b = gammaBlob{}
	}
	return err
}

var gammaCallNames = fields("id", "name", "args")

func (c *gammaCall) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, gammaCallNames) {
		case 0:
			return d.str(&c.ID)
		case 1:
			return d.str(&c.Name)
		case 2:
			return d.raw(&c.Args)
		}
		return d.skip()
	})
	if null {
		*c = gammaCall{}
	}
	return err
}

var gammaFuncRespNames = fields("id", "name", "response")

func (r *gammaFuncResp) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, gammaFuncRespNames) {
		case 0:
			return d.str(&r.ID)
		case 1:
			return d.str(&r.Name)
		case 2:
			return r.result.readFrom(d, &r.Response)
		}
		return d.skip()
	})
	if null {
		*r = gammaFuncResp{}
	}
	return err
}

var gammaGenConfigNames = fields("maxOutputTokens", "temperature", "topP", "topK", "stopSequences", "candidateCount",
	"seed", "presencePenalty", "frequencyPenalty", "responseMimeType", "responseSchema", "responseJsonSchema",
	"responseModalities", "thinkingConfig", "responseLogprobs", "logprobs", "speechConfig")

func (g *gammaGenConfig) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, gammaGenConfigNames) {
		case 0:
			return d.intPtr(&g.MaxOutputTokens)
		case 1:
			return d.floatPtr(&g.Temperature)
		case 2:
			return d.floatPtr(&g.TopP)
		case 3:
			return d.intPtr(&g.TopK)
		case 4:
			return d.strs(&g.StopSequences)
		case 5:
			return d.intPtr(&g.CandidateCount)
		case 6:
			return d.int64Ptr(&g.Seed)
		case 7:
			return d.floatPtr(&g.PresencePenalty)
		case 8:
			return d.floatPtr(&g.FrequencyPenalty)
		case 9:
			return d.str(&g.ResponseMimeType)
		case 10:
			return d.raw(&g.ResponseSchema)
		case 11:
			return d.raw(&g.ResponseJSONSchema)
		case 12:
			return d.strs(&g.ResponseModalities)
		case 13:
			if ok, err := want(d, &g.ThinkingConfig); !ok || err != nil {
				return err
			}
			return g.ThinkingConfig.read(d)
		case 14:
			return d.boolPtr(&g.ResponseLogprobs)
		case 15:
			return d.intPtr(&g.Logprobs)
		case 16:
			return d.raw(&g.SpeechConfig)
		}
		return d.skip()
	})
	if null {
		*g = gammaGenConfig{}
	}
	return err
}

var gammaThinkingNames = fields("thinkingBudget", "thinkingLevel", "includeThoughts")

func (t *gammaThinkingConfig) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch fieldOf(name, gammaThinkingNames) {
		case 0:
			return d.intPtr(&t.ThinkingBudget)
		case 1:
			return d.str(&t.ThinkingLevel)
		case 2:
			return d.boolean(&t.IncludeThoughts)
		}
		return d.skip()
	})
	if null {
		*t = gammaThinkingConfig{}
	}
	return err
}

var gammaToolConfigNames = fields("functionCallingConfig")
var gammaFuncCallingNames = fields("mode", "allowedFunctionNames")

func (t *gammaToolConfig) read(d *jr) error {
	null, err := d.object(func(name string) error {
		if fieldOf(name, gammaToolConfigNames) != 0 {
			return d.skip()
		}
		fc := &t.FunctionCallingConfig
		null, err := d.object(func(name string) error {
			switch fieldOf(name, gammaFuncCallingNames) {
			case 0:
				return d.str(&fc.Mode)
			case 1:
				return d.strs(&fc.AllowedFunctionNames)
			}
			return d.skip()
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

// readGammaToolKeys reads one tools[] entry as an object (null is one without members) and returns the
// first member name other than functionDeclarations / function_declarations, matched exactly (found
// reports one).
func readGammaToolKeys(d *jr) (builtin string, found bool, err error) {
	_, err = d.object(func(name string) error {
		if !found && name != "functionDeclarations" && name != "function_declarations" {
			builtin, found = name, true
		}
		return d.skip()
	})
	return builtin, found, err
}

var gammaToolNames = fields("functionDeclarations")
var gammaFuncDeclNames = fields("name", "description", "parameters", "parametersJsonSchema")

// read decodes a tool entry; on a value of the wrong kind it stops, keeping what it has read (the caller
// uses a partly read tool, as it did with the go-json-experiment decoder).
func (t *gammaTool) read(d *jr) error {
	null, err := d.object(func(name string) error {
		if fieldOf(name, gammaToolNames) != 0 {
			return d.skip()
		}
		if k := d.peek(); k != '[' && k != 'n' {
			return d.mismatch(k, "array") // the declarations read before stay
		}
		out := t.FunctionDeclarations[:0]
		null, err := d.array(func(int) error {
			out = append(out, gammaFuncDecl{})
			fd := &out[len(out)-1]
			null, err := d.object(func(name string) error {
				switch fieldOf(name, gammaFuncDeclNames) {
				case 0:
					return d.str(&fd.Name)
				case 1:
					return d.str(&fd.Description)
				case 2:
					return d.raw(&fd.Parameters)
				case 3:
					return d.raw(&fd.ParametersJSONSchema)
				}
				return d.skip()
			})
			if null {
				*fd = gammaFuncDecl{}
			}
			return err
		})
		t.FunctionDeclarations = sliceResult(out, null)
		return err
	})
	if null {
		*t = gammaTool{}
	}
	return err
}

// read decodes a functionResponse.response: "error" and "output" matched exactly, any other member sets
// Other; a value that is not an object (or null) fails.
func (m *gammaResultIn) read(d *jr) error {
	null, err := d.object(func(name string) error {
		switch name {
		case "error":
			return d.raw(&m.Error)
		case "output":
			return d.raw(&m.Output)
		}
		m.Other = true
		return d.skip()
	})
	if null {
		*m = gammaResultIn{}
	}
	return err
}

// readFrom reads a function response's response as raw (into *raw) and as gammaResultIn in one pass. A read
// that fails is not an error here (gammaResultPart keeps such a response as it is): the value is skipped
// from its start instead, so a syntax error is the one d.raw gave.
func (r *gammaResultRead) readFrom(d *jr, raw *json.RawMessage) error {
	start, depth := d.mark()
	*r = gammaResultRead{read: true}
	if err := r.in.read(d); err != nil {
		r.in, r.failed = gammaResultIn{}, true
		d.i, d.depth = start, depth
		if err := d.skip(); err != nil {
			return err
		}
	}
	*raw = json.RawMessage(d.b[start:d.i:d.i])
	return nil
}

// readFrom reads a content's parts (also as raw, into *raw) in the body's one pass, appended to *parts.
// An error that is not in the body's syntax (a value of the wrong kind) is kept in r.err and the parts
// skipped: the caller reports it when it converts the content, where it decoded the parts kept raw
// before; a syntax error is the body's, returned at once as before.
func (r *gammaPartsRead) readFrom(d *jr, parts *[]gammaPartIn, raw *json.RawMessage) error {
	d.ws()
	start, depth, n := d.i, d.depth, len(*parts)
	*r = gammaPartsRead{read: true}
	out := *parts
	null, err := d.array(func(int) error {
		out = append(out, gammaPartIn{})
		return out[len(out)-1].read(d)
	})
	*parts = out
	if !null {
		r.parts = out[n:len(out):len(out)]
	}
	if err != nil {
		d.i, d.depth = start, depth
		if err := d.skip(); err != nil {
			return err
		}
		*r = gammaPartsRead{read: true, err: err}
	}
	*raw = json.RawMessage(d.b[start:d.i:d.i])
	return nil
}
