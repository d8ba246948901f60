package translate

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/dataplane/jsonkit"
	"github.com/tollgate/tollgate/shared/vocab"
)

// specialOp translates a non-generation operation (count_tokens, create_embedding).
type specialOp interface {
	Request(in ClientRequest) (*canon.UpstreamRequest, error)
	Response(body []byte) ([]byte, error)
}

// ---- count_tokens: beta count_tokens <-> gamma countTokens <-> alpha responses input_tokens ----

type countTokens struct {
	client, dest vocab.Kind
	st           *canon.State
}

func newCountTokens(p Pair) (specialOp, error) {
	ok := func(k vocab.Kind) bool { return k == vocab.KindAlpha || k == vocab.KindBeta || k == vocab.KindGamma }
	if !ok(p.Kind) || !ok(p.DestKind) || p.Kind == p.DestKind {
		return nil, fmt.Errorf("new translator %s: %w", p, ErrUnsupported)
	}
	return &countTokens{client: p.Kind, dest: p.DestKind, st: canon.NewState(canon.Options{BetaMaxTokens: DefaultBetaMaxTokens})}, nil
}

func (c *countTokens) Request(in ClientRequest) (*canon.UpstreamRequest, error) {
	var r *canon.Request
	var err error
	switch c.client {
	case vocab.KindAlpha:
		c.st.Client = vocab.KindAlphaResponses
		r, err = alpha.Responses{}.DecodeRequest(in.Body, c.st)
	case vocab.KindBeta:
		c.st.Client = vocab.KindBetaMessages
		r, err = beta.Messages{}.DecodeRequest(in.Body, c.st)
	case vocab.KindGamma:
		c.st.Client = vocab.KindGammaGenerateContent
		body := in.Body
		var w struct {
			GenerateContentRequest json.RawMessage `json:"generateContentRequest"`
		}
		if json.Unmarshal(body, &w) == nil && len(w.GenerateContentRequest) > 0 {
			body = w.GenerateContentRequest
		}
		r, err = gamma.GenerateContent{}.DecodeRequest(body, c.st)
	}
	if err != nil {
		return nil, err
	}
	r.Stream = false
	switch c.dest {
	case vocab.KindAlpha:
		up, err := alpha.Responses{}.EncodeRequest(r, in.Model, false, c.st)
		if err != nil {
			return nil, err
		}
		// input_tokens takes the responses request fields minus the generation-only ones
		if up.Body, err = patchJSON(up.Body, "", "store", "stream", "max_output_tokens", "temperature", "top_p", "include", "service_tier", "user", "parallel_tool_calls"); err != nil {
			return nil, err
		}
		up.Path = "/v1/responses/input_tokens"
		return up, nil
	case vocab.KindBeta:
		up, err := beta.Messages{}.EncodeRequest(r, in.Model, false, c.st)
		if err != nil {
			return nil, err
		}
		if up.Body, err = patchJSON(up.Body, "", "max_tokens", "stream", "temperature", "top_p", "top_k", "stop_sequences", "metadata", "service_tier"); err != nil {
			return nil, err
		}
		up.Path = "/v1/messages/count_tokens"
		return up, nil
	default:
		up, err := gamma.GenerateContent{}.EncodeRequest(r, in.Model, false, c.st)
		if err != nil {
			return nil, err
		}
		var g map[string]json.RawMessage
		if err := json.Unmarshal(up.Body, &g); err != nil {
			return nil, fmt.Errorf("re-read gamma body: %w", err)
		}
		delete(g, "generationConfig")
		delete(g, "service_tier")
		g["model"] = jsonkit.MustMarshal("models/" + strings.TrimPrefix(in.Model, "models/"))
		if up.Body, err = jsonkit.Marshal(map[string]any{"generateContentRequest": g}); err != nil {
			return nil, err
		}
		up.Path = gamma.ModelPath(in.Model, "countTokens")
		return up, nil
	}
}

func (c *countTokens) Response(body []byte) ([]byte, error) {
	var in struct {
		InputTokens *int64 `json:"input_tokens"`
		TotalTokens *int64 `json:"totalTokens"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode count tokens response: %w", err)
	}
	var n int64
	switch {
	case in.InputTokens != nil:
		n = *in.InputTokens
	case in.TotalTokens != nil:
		n = *in.TotalTokens
	}
	switch c.client {
	case vocab.KindAlpha:
		return jsonkit.Marshal(map[string]any{"object": "response.input_tokens", "input_tokens": n})
	case vocab.KindBeta:
		return jsonkit.Marshal(map[string]any{"input_tokens": n})
	}
	return jsonkit.Marshal(map[string]any{"totalTokens": n})
}

// ---- create_embedding: alpha /v1/embeddings <-> gamma embedContent / batchEmbedContents ----

type embedding struct {
	client vocab.Kind
	model  string
	batch  bool
	base64 bool
}

func newEmbedding(p Pair) (specialOp, error) {
	if !(p.Kind == vocab.KindAlpha && p.DestKind == vocab.KindGamma) && !(p.Kind == vocab.KindGamma && p.DestKind == vocab.KindAlpha) {
		return nil, fmt.Errorf("new translator %s: %w", p, ErrUnsupported)
	}
	return &embedding{client: p.Kind}, nil
}

type gammaEmbedReq struct {
	Model                string        `json:"model,omitempty"`
	Content              gamma.Content `json:"content"`
	TaskType             string        `json:"taskType,omitempty"`
	Title                string        `json:"title,omitempty"`
	OutputDimensionality *int          `json:"outputDimensionality,omitempty"`
}

func (e *embedding) Request(in ClientRequest) (*canon.UpstreamRequest, error) {
	e.model = in.Model
	if e.client == vocab.KindAlpha {
		return e.alphaToGamma(in)
	}
	return e.gammaToAlpha(in)
}

func (e *embedding) alphaToGamma(in ClientRequest) (*canon.UpstreamRequest, error) {
	var req struct {
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     *int            `json:"dimensions"`
	}
	if err := json.Unmarshal(in.Body, &req); err != nil {
		return nil, canon.BadRequest("body", fmt.Errorf("invalid embeddings request: %w", err))
	}
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		e.base64 = true
	default:
		return nil, canon.Refuse("encoding_format", "unknown encoding_format %q", req.EncodingFormat)
	}
	var texts []string
	var one string
	if jsonkit.IsJSONString(req.Input) && json.Unmarshal(req.Input, &one) == nil {
		texts = []string{one}
	} else if err := json.Unmarshal(req.Input, &texts); err != nil {
		return nil, canon.Refuse("input", "token-array input cannot be translated; send text")
	} else {
		e.batch = true
	}
	if len(texts) == 0 {
		return nil, canon.Refuse("input", "input is empty")
	}
	model := strings.TrimPrefix(in.Model, "models/")
	mk := func(t string) gammaEmbedReq {
		return gammaEmbedReq{Content: gamma.Content{Parts: []gamma.Part{{Text: canon.Strp(t)}}}, OutputDimensionality: req.Dimensions}
	}
	var body any
	method := "embedContent"
	if e.batch {
		method = "batchEmbedContents"
		reqs := make([]gammaEmbedReq, len(texts))
		for i, t := range texts {
			reqs[i] = mk(t)
			reqs[i].Model = "models/" + model
		}
		body = map[string]any{"requests": reqs}
	} else {
		body = mk(texts[0])
	}
	b, err := jsonkit.Marshal(body)
	if err != nil {
		return nil, err
	}
	return &canon.UpstreamRequest{Method: http.MethodPost, Path: gamma.ModelPath(model, method), Header: canon.JSONHeader(), Body: b}, nil
}

func (e *embedding) gammaToAlpha(in ClientRequest) (*canon.UpstreamRequest, error) {
	var req struct {
		Requests []gammaEmbedReq `json:"requests"`
		gammaEmbedReq
	}
	if err := json.Unmarshal(in.Body, &req); err != nil {
		return nil, canon.BadRequest("body", fmt.Errorf("invalid embed request: %w", err))
	}
	reqs := req.Requests
	if reqs == nil {
		reqs = []gammaEmbedReq{req.gammaEmbedReq}
	} else {
		e.batch = true
	}
	var texts []string
	var dims *int
	for i, r := range reqs {
		var b strings.Builder
		for j, p := range r.Content.Parts {
			if p.Text == nil {
				return nil, canon.Refuse(fmt.Sprintf("requests[%d].content.parts[%d]", i, j), "only text can be embedded through this route")
			}
			if j > 0 {
				b.WriteString("\n")
			}
			b.WriteString(*p.Text)
		}
		texts = append(texts, b.String())
		if r.OutputDimensionality != nil {
			if dims != nil && *dims != *r.OutputDimensionality {
				return nil, canon.Refuse(fmt.Sprintf("requests[%d].outputDimensionality", i), "mixed output dimensionalities cannot be translated")
			}
			dims = r.OutputDimensionality
		}
	}
	out := map[string]any{"model": in.Model, "encoding_format": "float"}
	if e.batch {
		out["input"] = texts
	} else {
		out["input"] = texts[0]
	}
	if dims != nil {
		out["dimensions"] = *dims
	}
	b, err := jsonkit.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &canon.UpstreamRequest{Method: http.MethodPost, Path: "/v1/embeddings", Header: canon.JSONHeader(), Body: b}, nil
}

func (e *embedding) Response(body []byte) ([]byte, error) {
	if e.client == vocab.KindAlpha {
		var in struct {
			Embedding  *struct{ Values json.RawMessage }  `json:"embedding"`
			Embeddings []struct{ Values json.RawMessage } `json:"embeddings"`
			Usage      *struct {
				PromptTokenCount int64 `json:"promptTokenCount"`
			} `json:"usageMetadata"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("decode embed response: %w", err)
		}
		vals := make([]json.RawMessage, 0, len(in.Embeddings)+1)
		if in.Embedding != nil {
			vals = append(vals, in.Embedding.Values)
		}
		for _, em := range in.Embeddings {
			vals = append(vals, em.Values)
		}
		data := make([]map[string]any, len(vals))
		for i, v := range vals {
			var emb any = v
			if e.base64 {
				s, err := floatsBase64(v)
				if err != nil {
					return nil, err
				}
				emb = s
			}
			data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
		}
		var n int64
		if in.Usage != nil {
			n = in.Usage.PromptTokenCount
		}
		return jsonkit.Marshal(map[string]any{"object": "list", "data": data, "model": strings.TrimPrefix(e.model, "models/"),
			"usage": map[string]int64{"prompt_tokens": n, "total_tokens": n}})
	}
	var in struct {
		Data []struct {
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, fmt.Errorf("decode embeddings response: %w", err)
	}
	sort.SliceStable(in.Data, func(i, j int) bool { return in.Data[i].Index < in.Data[j].Index })
	um := map[string]int64{"promptTokenCount": in.Usage.PromptTokens, "totalTokenCount": in.Usage.PromptTokens}
	if !e.batch {
		if len(in.Data) == 0 {
			return nil, fmt.Errorf("decode embeddings response: no data")
		}
		return jsonkit.Marshal(map[string]any{"embedding": map[string]any{"values": in.Data[0].Embedding}, "usageMetadata": um})
	}
	embs := make([]map[string]any, len(in.Data))
	for i, d := range in.Data {
		embs[i] = map[string]any{"values": d.Embedding}
	}
	return jsonkit.Marshal(map[string]any{"embeddings": embs, "usageMetadata": um})
}

// floatsBase64 encodes a JSON number array as base64 little-endian float32 (alpha encoding_format=base64).
func floatsBase64(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var nums []json.Number
	if err := dec.Decode(&nums); err != nil {
		return "", fmt.Errorf("decode embedding values: %w", err)
	}
	buf := make([]byte, 4*len(nums))
	for i, n := range nums {
		f, err := strconv.ParseFloat(string(n), 32)
		if err != nil {
			return "", fmt.Errorf("decode embedding value: %w", err)
		}
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(float32(f)))
	}
	return base64.StdEncoding.EncodeToString(buf), nil
}
