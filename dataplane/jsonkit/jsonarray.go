package jsonkit

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/tollgate/tollgate/dataplane/sse"
	"io"
)

// ErrJSONArraySyntax is returned (wrapped) when a JSON-array stream is malformed at the array level.
var ErrJSONArraySyntax = errors.New("jsonkit: malformed JSON array stream")

// JSONArrayDecoder yields the elements of a JSON array that arrives incrementally, as gamma's
// streamGenerateContent does without `alt=sse`: `[{chunk}`, `,\r\n{chunk}`, ..., `]`. It tracks nesting
// depth and string state only, so each element is returned as raw JSON bytes without being parsed; whitespace
// anywhere between elements (including keepalive whitespace) is skipped. A body that is a single JSON object
// instead of an array (for example an error object) is yielded as one element.
type JSONArrayDecoder struct {
	r     *bufio.Reader
	max   int
	buf   []byte
	state int // 0 before '[', 1 expecting element or ']', 2 expecting ',' or ']', 3 done
	err   error
	bare  bool
}

// NewJSONArrayDecoder returns a decoder reading from r with sse.DefaultMaxEventSize per element.
func NewJSONArrayDecoder(r io.Reader) *JSONArrayDecoder {
	return &JSONArrayDecoder{r: bufio.NewReaderSize(r, 32<<10), max: sse.DefaultMaxEventSize}
}

// Reset makes the decoder read a new stream from r, keeping its buffers, so decoders can be pooled.
func (d *JSONArrayDecoder) Reset(r io.Reader) {
	d.r.Reset(r)
	d.buf, d.state, d.err, d.bare = d.buf[:0], 0, nil, false
}

// Footprint is the memory its element buffer holds (a pool drops a decoder that grew large).
func (d *JSONArrayDecoder) Footprint() int { return cap(d.buf) }

// SetMaxElementSize changes the maximum size of one element; n <= 0 restores the default.
func (d *JSONArrayDecoder) SetMaxElementSize(n int) {
	if n <= 0 {
		n = sse.DefaultMaxEventSize
	}
	d.max = n
}

// Next returns the next element's raw JSON. The slice aliases an internal buffer valid until the next call.
// After the closing ']' it returns io.EOF; a stream cut before ']' returns io.ErrUnexpectedEOF (wrapped).
func (d *JSONArrayDecoder) Next() ([]byte, error) {
	if d.err != nil {
		return nil, d.err
	}
	for {
		c, err := d.skipSpace()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if d.state == 3 || (d.bare && d.state == 2) {
					d.err = io.EOF
				} else {
					d.err = fmt.Errorf("json array stream: %w", io.ErrUnexpectedEOF)
				}
				return nil, d.err
			}
			d.err = fmt.Errorf("json array stream: %w", err)
			return nil, d.err
		}
		switch d.state {
		case 0:
			if c == '[' {
				_, _ = d.r.ReadByte()
				d.state = 1
				continue
			}
			if c == '{' {
				d.bare = true
				el, err := d.value()
				if err != nil {
					return nil, err
				}
				d.state = 2
				return el, nil
			}
			return nil, d.fail("expected '[', got %q", c)
		case 1, 2:
			if d.bare {
				return nil, d.fail("unexpected %q after top-level object", c)
			}
			if c == ']' {
				_, _ = d.r.ReadByte()
				d.state = 3
				continue
			}
			if d.state == 2 {
				if c != ',' {
					return nil, d.fail("expected ',' or ']', got %q", c)
				}
				_, _ = d.r.ReadByte()
				d.state = 1
				continue
			}
			el, err := d.value()
			if err != nil {
				return nil, err
			}
			d.state = 2
			return el, nil
		case 3:
			return nil, d.fail("unexpected %q after ']'", c)
		}
	}
}

func (d *JSONArrayDecoder) fail(format string, args ...any) error {
	d.err = fmt.Errorf("json array stream: "+format+": %w", append(args, ErrJSONArraySyntax)...)
	return d.err
}

func (d *JSONArrayDecoder) skipSpace() (byte, error) {
	for {
		b, err := d.r.Peek(1)
		if err != nil {
			return 0, err
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = d.r.ReadByte()
		default:
			return b[0], nil
		}
	}
}

// value reads one JSON value (object, array, string or scalar) without validating its inside.
func (d *JSONArrayDecoder) value() ([]byte, error) {
	d.buf = d.buf[:0]
	depth := 0
	inStr, esc := false, false
	for {
		c, err := d.r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if depth == 0 && !inStr && len(d.buf) > 0 {
					return d.buf, nil // scalar ended by EOF
				}
				d.err = fmt.Errorf("json array stream: element: %w", io.ErrUnexpectedEOF)
				return nil, d.err
			}
			d.err = fmt.Errorf("json array stream: element: %w", err)
			return nil, d.err
		}
		if len(d.buf) >= d.max {
			d.err = fmt.Errorf("json array stream: element of more than %d bytes: %w", d.max, sse.ErrEventTooLarge)
			return nil, d.err
		}
		if inStr {
			d.buf = append(d.buf, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				if depth == 0 {
					return d.buf, nil
				}
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				// end of a scalar at the array level
				_ = d.r.UnreadByte()
				if len(d.buf) == 0 {
					return nil, d.fail("unexpected %q", c)
				}
				return d.buf, nil
			}
			depth--
			d.buf = append(d.buf, c)
			if depth == 0 {
				return d.buf, nil
			}
			continue
		case ',', ' ', '\t', '\r', '\n':
			if depth == 0 {
				_ = d.r.UnreadByte()
				if len(d.buf) == 0 {
					return nil, d.fail("unexpected %q", c)
				}
				return d.buf, nil
			}
		}
		d.buf = append(d.buf, c)
	}
}
