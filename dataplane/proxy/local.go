package proxy

import (
	"strconv"
	"time"

	"github.com/tollgate/tollgate/dataplane/routing"
	"github.com/tollgate/tollgate/shared/snapshot"
	"github.com/tollgate/tollgate/shared/vocab"
)

// listModels renders the models key may use (every enabled route's name and aliases it is permitted to
// use, ordered by route name) in the shape of kind's dialect family.
func listModels(snap *snapshot.Compiled, key *snapshot.APIKey, kind vocab.Kind) []byte {
	var ids []string
	for _, r := range snap.Routes() {
		if len(r.Groups) == 0 {
			continue
		}
		for _, name := range append([]string{r.Name}, r.Aliases...) {
			if routing.Permitted(key, name, r) {
				ids = append(ids, name)
			}
		}
	}
	created := snap.BuiltAt
	b := make([]byte, 0, 128+96*len(ids))
	switch kind.Family() {
	case vocab.KindBeta:
		b = append(b, `{"data":[`...)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendBetaModel(b, id, created)
		}
		b = append(b, `],"has_more":false,"first_id":`...)
		b = appendNullableID(b, ids, 0)
		b = append(b, `,"last_id":`...)
		b = appendNullableID(b, ids, len(ids)-1)
		b = append(b, '}')
	case vocab.KindGamma:
		b = append(b, `{"models":[`...)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendGammaModel(b, id)
		}
		b = append(b, "]}"...)
	default:
		b = append(b, `{"object":"list","data":[`...)
		for i, id := range ids {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendAlphaModel(b, id, created)
		}
		b = append(b, "]}"...)
	}
	return b
}

// getModel renders one model object in the shape of kind's dialect family.
func getModel(snap *snapshot.Compiled, id string, kind vocab.Kind) []byte {
	b := make([]byte, 0, 160)
	switch kind.Family() {
	case vocab.KindBeta:
		return appendBetaModel(b, id, snap.BuiltAt)
	case vocab.KindGamma:
		return appendGammaModel(b, id)
	}
	return appendAlphaModel(b, id, snap.BuiltAt)
}

func appendNullableID(b []byte, ids []string, i int) []byte {
	if i < 0 || i >= len(ids) {
		return append(b, "null"...)
	}
	return appendJSONString(b, ids[i])
}

func appendAlphaModel(b []byte, id string, created time.Time) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, created.Unix(), 10)
	return append(b, `,"owned_by":"tollgate"}`...)
}

func appendBetaModel(b []byte, id string, created time.Time) []byte {
	b = append(b, `{"type":"model","id":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"display_name":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"created_at":`...)
	b = appendJSONString(b, created.UTC().Format(time.RFC3339))
	return append(b, '}')
}

func appendGammaModel(b []byte, id string) []byte {
	b = append(b, `{"name":`...)
	b = appendJSONString(b, "models/"+id)
	b = append(b, `,"baseModelId":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"version":"1","displayName":`...)
	b = appendJSONString(b, id)
	return append(b, `,"supportedGenerationMethods":["generateContent","streamGenerateContent","countTokens","embedContent"]}`...)
}
