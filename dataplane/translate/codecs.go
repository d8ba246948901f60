package translate

import (
	"errors"

	"github.com/tollgate/tollgate/dataplane/canon"
	"github.com/tollgate/tollgate/dataplane/dialect/alpha"
	"github.com/tollgate/tollgate/dataplane/dialect/beta"
	"github.com/tollgate/tollgate/dataplane/dialect/gamma"
	"github.com/tollgate/tollgate/shared/vocab"
)

func asRequestError(err error) *canon.RequestError {
	var re *canon.RequestError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

// codecFor is the codec of a generation kind, nil for any other kind.
func codecFor(k vocab.Kind) canon.Codec {
	switch k {
	case vocab.KindAlphaChatCompletions:
		return alpha.Chat{}
	case vocab.KindAlphaResponses:
		return alpha.Responses{}
	case vocab.KindBetaMessages:
		return beta.Messages{}
	case vocab.KindGammaGenerateContent:
		return gamma.GenerateContent{}
	}
	return nil
}
