package gamma

import (
	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
)

// The fast reader of this dialect's common stream events (see jsonkit.EventReader: it decides an event
// exactly as the general decoder would, or declines it).

var (
	gammaUsageFields     = []string{"promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount", "toolUsePromptTokenCount", "thoughtsTokenCount", "totalTokenCount", "promptTokensDetails", "candidatesTokensDetails", "serviceTier", "trafficType"}
	gammaModalityFields  = []string{"modality", "tokenCount"}
	gammaChunkFields     = []string{"candidates", "promptFeedback", "usageMetadata", "modelVersion", "responseId", "error"}
	gammaCandidateFields = []string{"content", "finishReason", "index"}
	gammaContentFields   = []string{"role", "parts"}
	gammaPartFields      = []string{"text", "thought", "inlineData", "fileData", "functionCall", "functionResponse", "thoughtSignature", "executableCode", "codeExecutionResult"}
	gammaCallFields      = []string{"id", "name", "args"}
)

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
	var u *usageIn
	var seen jsonkit.Seen
	items := d.Items[:0]
	ub := usageIn{PromptTokensDetails: d.Modalities[:0]}
	err := r.Event(func(name string) (err error) {
		switch name {
		case "responseId":
			if err = seen.Once("responseId"); err == nil {
				id, err = r.Str()
			}
		case "modelVersion":
			if err = seen.Once("modelVersion"); err == nil {
				model, err = r.Str()
			}
		case "usageMetadata":
			if err = seen.Once("usageMetadata"); err != nil {
				return err
			}
			if null, err := r.IsNull(); err != nil || null {
				return err
			}
			u = &ub
			return scanGammaUsage(&r, u)
		case "error", "promptFeedback":
			if err = seen.Once("error"); err != nil {
				return err
			}
			if null, err := r.IsNull(); err != nil || !null {
				return jsonkit.ErrDecline
			}
		case "candidates":
			if err = seen.Once("candidates"); err != nil {
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
			d.Bill.take(u)
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
		var seen jsonkit.Seen
		var idx int64
		var fin jsonkit.StrView
		err = r.Fields(func(name string) (err error) {
			switch name {
			case "index":
				if err = seen.Once("index"); err == nil {
					idx, err = r.Num()
				}
			case "finishReason":
				if err = seen.Once("finishReason"); err == nil {
					fin, err = r.Str()
				}
			case "content":
				if err = seen.Once("content"); err != nil {
					return err
				}
				var cseen jsonkit.Seen
				return r.Members(func(name string) (err error) {
					switch name {
					case "role":
						if err = cseen.Once("role"); err == nil {
							_, err = r.Str()
						}
					case "parts":
						if err = cseen.Once("parts"); err == nil {
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
		var seen, cseen jsonkit.Seen
		err = r.Fields(func(name string) (err error) {
			switch name {
			case "text":
				if err = seen.Once("text"); err != nil {
					return err
				}
				if null, err := r.IsNull(); err != nil || null {
					return err
				}
				p.hasText = true
				p.text, err = r.Str()
			case "thought":
				if err = seen.Once("thought"); err == nil {
					p.thought, err = r.Flag()
				}
			case "thoughtSignature":
				if err = seen.Once("thoughtSignature"); err == nil {
					p.sig, err = r.Str()
				}
			case "functionCall":
				if err = seen.Once("functionCall"); err != nil {
					return err
				}
				if null, err := r.IsNull(); err != nil || null {
					return err
				}
				p.call = true
				return r.Members(func(name string) (err error) {
					switch name {
					case "id":
						if err = cseen.Once("id"); err == nil {
							p.callID, err = r.Str()
						}
					case "name":
						if err = cseen.Once("name"); err == nil {
							p.name, err = r.Str()
						}
					case "args":
						if err = cseen.Once("args"); err == nil {
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

// scanGammaUsage reads a usageMetadata object (the caller read null); the members only billing reads
// (candidatesTokensDetails, serviceTier, trafficType) are left to the general decoder.
func scanGammaUsage(r *jsonkit.EventReader, u *usageIn) error {
	var seen jsonkit.Seen
	return r.Members(func(name string) (err error) {
		var dst *jsonkit.Count
		switch name {
		case "promptTokenCount":
			err, dst = seen.Once("promptTokenCount"), &u.PromptTokenCount
		case "cachedContentTokenCount":
			err, dst = seen.Once("cachedContentTokenCount"), &u.CachedContentTokenCount
		case "candidatesTokenCount":
			err, dst = seen.Once("candidatesTokenCount"), &u.CandidatesTokenCount
		case "toolUsePromptTokenCount":
			err, dst = seen.Once("toolUsePromptTokenCount"), &u.ToolUsePromptTokenCount
		case "thoughtsTokenCount":
			err, dst = seen.Once("thoughtsTokenCount"), &u.ThoughtsTokenCount
		case "totalTokenCount":
			err, dst = seen.Once("totalTokenCount"), &u.TotalTokenCount
		case "promptTokensDetails":
			if err = seen.Once("promptTokensDetails"); err != nil {
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
				var m modalityIn
				var mseen jsonkit.Seen
				err = r.Fields(func(name string) (err error) {
					switch name {
					case "modality":
						if err = mseen.Once("modality"); err == nil {
							var v jsonkit.StrView
							v, err = r.Str()
							m.Modality = v.S // compared only (canonical), never kept
						}
					case "tokenCount":
						if err = mseen.Once("tokenCount"); err == nil {
							m.TokenCount, err = count(r)
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
		case "candidatesTokensDetails", "serviceTier", "trafficType":
			return jsonkit.ErrDecline
		default:
			return r.Other(name, gammaUsageFields)
		}
		if err == nil {
			*dst, err = count(r)
		}
		return err
	})
}

// count reads a token count the fast reader can decide (an integer; a negative one is 0, as jsonkit.Count
// reads it); any other value declines to the general decoder.
func count(r *jsonkit.EventReader) (jsonkit.Count, error) {
	n, err := r.Num()
	return jsonkit.Count{V: max(n, 0), Set: true}, err
}
