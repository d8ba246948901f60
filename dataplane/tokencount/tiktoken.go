//go:build !notokenizer

package tokencount

import (
	"fmt"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Supported reports whether local counting is compiled in.
func Supported() bool { return true }

var codecs sync.Map // encoding name → tokenizer.Codec

func codec(enc string) (tokenizer.Codec, error) {
	if c, ok := codecs.Load(enc); ok {
		return c.(tokenizer.Codec), nil
	}
	c, err := tokenizer.Get(tokenizer.Encoding(enc))
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", enc, err)
	}
	actual, _ := codecs.LoadOrStore(enc, c)
	return actual.(tokenizer.Codec), nil
}

func count(enc, text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	c, err := codec(enc)
	if err != nil {
		return 0, err
	}
	n, err := c.Count(text)
	if err != nil {
		return 0, fmt.Errorf("count tokens (%s): %w", enc, err)
	}
	return n, nil
}

// Warm loads the vocabularies now (they are built on first use otherwise), so the first count after a
// broken stream does not pay for it.
func Warm() {
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		_, _ = count(enc, "warm")
	}
}
