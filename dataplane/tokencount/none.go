//go:build notokenizer

package tokencount

// Supported reports whether local counting is compiled in.
func Supported() bool { return false }

func count(string, string) (int, error) { return 0, ErrUnsupported }

// Warm does nothing without the tokenizer.
func Warm() {}
