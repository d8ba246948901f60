package canon

import (
	"encoding/base64"
	"strings"

	"github.com/tollgate/tollgate/shared/vocab"
)

// Thinking signatures are opaque tokens only the family that minted them can verify. Inside the canonical
// form a signature decoded from an upstream carries a tag naming that family; clients of another family
// receive the tagged token (it is opaque to them) and replay it verbatim, and the request encoder of each
// upstream family replays only signatures tagged with its own family (stripping the tag). Signatures
// without a tag came from the client's own family and cannot be verified elsewhere, so they are dropped.
const (
	sigTagBeta  = "tgb1."
	sigTagGamma = "tgg1."
	// RespSigPrefix (tgrs1.<item id>.<encrypted_content>) tags alpha responses reasoning items.
)

func sigTag(family vocab.Kind) string {
	switch family {
	case vocab.KindBeta:
		return sigTagBeta
	case vocab.KindGamma:
		return sigTagGamma
	case vocab.KindAlpha:
		return RespSigPrefix
	}
	return ""
}

func TagSig(family vocab.Kind, sig string) string {
	if sig == "" {
		return ""
	}
	return sigTag(family) + sig
}

// SigForUpstream returns the signature to replay to an upstream of the given family, if it is that family's.
func SigForUpstream(family vocab.Kind, sig string) (string, bool) {
	if sig == "" {
		return "", false
	}
	rest, ok := strings.CutPrefix(sig, sigTag(family))
	return rest, ok
}

// SigToClient renders a canonical (tagged) signature for the client: native signatures lose the tag;
// foreign ones keep it, and gamma clients get them in standard base64 (the genai SDK decodes
// thoughtSignature as bytes).
func (st *State) SigToClient(sig string) string {
	if sig == "" {
		return ""
	}
	fam := st.Client.Family()
	if fam == vocab.KindAlpha {
		// alpha responses: a native tag is tgrs1.<id>.<encrypted_content>
		if rest, ok := strings.CutPrefix(sig, RespSigPrefix); ok {
			if _, enc, ok := strings.Cut(rest, "."); ok {
				return enc
			}
		}
		return sig
	}
	if rest, ok := strings.CutPrefix(sig, sigTag(fam)); ok {
		return rest
	}
	if fam == vocab.KindGamma {
		return base64.StdEncoding.EncodeToString([]byte(sig))
	}
	return sig
}

// SigFromClient undoes SigToClient's gamma wrapping for a replayed thoughtSignature.
func (st *State) SigFromClient(sig string) string {
	if st.Client.Family() != vocab.KindGamma || sig == "" {
		return sig
	}
	if b, err := base64.StdEncoding.DecodeString(sig); err == nil {
		s := string(b)
		if strings.HasPrefix(s, sigTagBeta) || strings.HasPrefix(s, RespSigPrefix) {
			return s
		}
	}
	return sig
}

// RespSigPrefix marks a thinking signature that carries an alpha responses reasoning item (id and
// encrypted_content) through a beta or gamma client, so it can be replayed to an alpha responses upstream.
const RespSigPrefix = "tgrs1."
