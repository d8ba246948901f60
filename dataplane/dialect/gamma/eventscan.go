package gamma

import (
	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

var (
	gammaUsageFields     = []string{"promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount", "toolUsePromptTokenCount", "thoughtsTokenCount", "totalTokenCount", "promptTokensDetails"}
	gammaModalityFields  = []string{"modality", "tokenCount"}
	gammaChunkFields     = []string{"candidates", "promptFeedback", "usageMetadata", "modelVersion", "responseId", "error"}
	gammaCandidateFields = []string{"content", "finishReason", "index"}
	gammaContentFields   = []string{"role", "parts"}
	gammaPartFields      = []string{"text", "thought", "inlineData", "fileData", "functionCall", "functionResponse", "thoughtSignature", "executableCode", "codeExecutionResult"}
	gammaCallFields      = []string{"id", "name", "args"}
)

// ---- gamma ----

// gammaFastItem is one part of the index-0 candidate, or its finish reason (finish set), read by the fast
// path in order.
type gammaFastItem struct {
	finish jsonkit.StrView
	isFin  bool
	part   gammaEvPart
}

// Fast reads a gamma chunk: text, thought and function-call parts, thought signatures, finish reasons,
// usage.
func (d *Decoder) Fast(data []byte, out []canon.Event) ([]canon.Event, bool) {
	r := jsonkit.NewEventReader(data)
	var id, model jsonkit.StrView
	var u *gammaUsage
	var seen uint32
	items := d.Items[:0]
	ub := gammaUsage{PromptTokensDetails: d.Modalities[:0]}
	err := r.Event(func(name string) (err error) {
		switch name {
		case "responseId":
			if err = jsonkit.Once(&seen, 0); err == nil {
				id, err = r.Str()
			}
		case "modelVersion":
			if err = jsonkit.Once(&seen, 1); err == nil {
				model, err = r.Str()
			}
		case "usageMetadata":
			if err = jsonkit.Once(&seen, 2); err != nil {
				return err
			}
			if null, err := r.IsNull(); err != nil || null {
				return err
			}
			u = &ub
			return scanGammaUsage(&r, u)
		case "error", "promptFeedback":
			if err = jsonkit.Once(&seen, 3); err != nil {
				return err
			}
			if null, err := r.IsNull(); err != nil || !null {
				return jsonkit.ErrDecline
			}
		case "candidates":
			if err = jsonkit.Once(&seen, 4); err != nil {
				return err
			}
			items, err = scanGammaCandidates(&r, items)
		default:
			err = r.Other(name, gammaChunkFields)
		}
		return err
	})
	d.Items, d.Modalities = items[:0], ub.PromptTokensDetails[:0]
	if err == nil {
		if !d.started {
			d.started = true
			out = append(out, canon.Event{Type: canon.EvStart, ID: id.Keep(), Model: model.Keep()})
		}
		if u != nil {
			out = append(out, canon.Event{Type: canon.EvUsage, Usage: u.canonical()})
		}
		for i := range items {
			if it := &items[i]; it.isFin {
				out = d.Finish(out, it.finish.S)
			} else {
				out = d.part(out, &it.part)
			}
		}
	}
	clear(items)
	clear(ub.PromptTokensDetails)
	return out, err == nil
}

// gammaCandidates reads the candidates array, keeping the items of those with index 0.
func scanGammaCandidates(r *jsonkit.EventReader, items []gammaFastItem) ([]gammaFastItem, error) {
	ok, err := r.OpenArr()
	if err != nil || !ok {
		return items, err
	}
	for first := true; ; first = false {
		ok, err := r.ElemObj(first)
		if err != nil || !ok {
			return items, err
		}
		from := len(items)
		var seen uint32
		var idx int64
		var fin jsonkit.StrView
		err = r.Fields(func(name string) (err error) {
			switch name {
			case "index":
				if err = jsonkit.Once(&seen, 0); err == nil {
					idx, err = r.Num()
				}
			case "finishReason":
				if err = jsonkit.Once(&seen, 1); err == nil {
					fin, err = r.Str()
				}
			case "content":
				if err = jsonkit.Once(&seen, 2); err != nil {
					return err
				}
				var cseen uint32
				return r.Members(func(name string) (err error) {
					switch name {
					case "role":
						if err = jsonkit.Once(&cseen, 0); err == nil {
							_, err = r.Str()
						}
					case "parts":
						if err = jsonkit.Once(&cseen, 1); err == nil {
							items, err = scanGammaParts(r, items)
						}
					default:
						err = r.Other(name, gammaContentFields)
					}
					return err
				})
			default:
				err = r.Other(name, gammaCandidateFields)
			}
			return err
		})
		if err != nil {
			return items, err
		}
		if idx != 0 {
			clear(items[from:])
			items = items[:from]
			continue
		}
		if fin.S != "" {
			items = append(items, gammaFastItem{finish: fin, isFin: true})
		}
	}
}

// gammaParts reads a parts array.
func scanGammaParts(r *jsonkit.EventReader, items []gammaFastItem) ([]gammaFastItem, error) {
	ok, err := r.OpenArr()
	if err != nil || !ok {
		return items, err
	}
	for first := true; ; first = false {
		ok, err := r.ElemObj(first)
		if err != nil || !ok {
			return items, err
		}
		var p gammaEvPart
		var seen, cseen uint32
		err = r.Fields(func(name string) (err error) {
			switch name {
			case "text":
				if err = jsonkit.Once(&seen, 0); err != nil {
					return err
				}
				if null, err := r.IsNull(); err != nil || null {
					return err
				}
				p.hasText = true
				p.text, err = r.Str()
			case "thought":
				if err = jsonkit.Once(&seen, 1); err == nil {
					p.thought, err = r.Flag()
				}
			case "thoughtSignature":
				if err = jsonkit.Once(&seen, 2); err == nil {
					p.sig, err = r.Str()
				}
			case "functionCall":
				if err = jsonkit.Once(&seen, 3); err != nil {
					return err
				}
				if null, err := r.IsNull(); err != nil || null {
					return err
				}
				p.call = true
				return r.Members(func(name string) (err error) {
					switch name {
					case "id":
						if err = jsonkit.Once(&cseen, 0); err == nil {
							p.callID, err = r.Str()
						}
					case "name":
						if err = jsonkit.Once(&cseen, 1); err == nil {
							p.name, err = r.Str()
						}
					case "args":
						if err = jsonkit.Once(&cseen, 2); err == nil {
							var raw []byte
							r.Ws()
							start := r.I
							if err = r.Skip(); err == nil {
								raw = r.B[start:r.I:r.I]
							}
							p.args = raw
						}
					default:
						err = r.Other(name, gammaCallFields)
					}
					return err
				})
			default:
				err = r.Other(name, gammaPartFields)
			}
			return err
		})
		if err != nil {
			return items, err
		}
		items = append(items, gammaFastItem{part: p})
	}
}

// gammaUsage reads a usageMetadata object (the caller read null).
func scanGammaUsage(r *jsonkit.EventReader, u *gammaUsage) error {
	var seen uint32
	return r.Members(func(name string) (err error) {
		var dst *int64
		switch name {
		case "promptTokenCount":
			err, dst = jsonkit.Once(&seen, 0), &u.PromptTokenCount
		case "cachedContentTokenCount":
			err, dst = jsonkit.Once(&seen, 1), &u.CachedContentTokenCount
		case "candidatesTokenCount":
			err, dst = jsonkit.Once(&seen, 2), &u.CandidatesTokenCount
		case "toolUsePromptTokenCount":
			err, dst = jsonkit.Once(&seen, 3), &u.ToolUsePromptTokenCount
		case "thoughtsTokenCount":
			err, dst = jsonkit.Once(&seen, 4), &u.ThoughtsTokenCount
		case "totalTokenCount":
			err, dst = jsonkit.Once(&seen, 5), &u.TotalTokenCount
		case "promptTokensDetails":
			if err = jsonkit.Once(&seen, 6); err != nil {
				return err
			}
			ok, err := r.OpenArr()
			if err != nil || !ok {
				return err
			}
			for first := true; ; first = false {
				ok, err := r.ElemObj(first)
				if err != nil || !ok {
					return err
				}
				var m modalityCount
				var mseen uint32
				err = r.Fields(func(name string) (err error) {
					switch name {
					case "modality":
						if err = jsonkit.Once(&mseen, 0); err == nil {
							var v jsonkit.StrView
							v, err = r.Str()
							m.Modality = v.S // compared only (canonical), never kept
						}
					case "tokenCount":
						if err = jsonkit.Once(&mseen, 1); err == nil {
							m.TokenCount, err = r.Num()
						}
					default:
						err = r.Other(name, gammaModalityFields)
					}
					return err
				})
				if err != nil {
					return err
				}
				u.PromptTokensDetails = append(u.PromptTokensDetails, m)
			}
		default:
			return r.Other(name, gammaUsageFields)
		}
		if err == nil {
			*dst, err = r.Num()
		}
		return err
	})
}
