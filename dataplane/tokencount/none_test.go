//go:build notokenizer

package tokencount_test

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/dataplane/tokencount"
	"github.com/tollgate/tollgate/shared/vocab"
)

func TestCompiledOut(t *testing.T) {
	if tokencount.Supported() {
		t.Fatal("Supported() = true with the notokenizer tag")
	}
	if _, _, err := tokencount.Count(vocab.KindAlphaChatCompletions, "gpt-4o", []byte(`{"messages":[]}`), "x"); !errors.Is(err, tokencount.ErrUnsupported) {
		t.Errorf("Count = %v, want ErrUnsupported", err)
	}
}
