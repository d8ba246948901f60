package secret

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpenRoundTripAndTamper(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	b, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	c1, err := b.Seal([]byte("sk-upstream"))
	if err != nil {
		t.Fatal(err)
	}
	c2, _ := b.Seal([]byte("sk-upstream"))
	if bytes.Equal(c1, c2) {
		t.Fatal("two seals of one secret are identical; nonce is not random")
	}
	if bytes.Contains(c1, []byte("sk-upstream")) {
		t.Fatal("ciphertext contains the plaintext")
	}
	got, err := b.Open(c1)
	if err != nil || string(got) != "sk-upstream" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	c1[len(c1)-1] ^= 1
	if _, err := b.Open(c1); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("Open(tampered) = %v, want ErrDecrypt", err)
	}
	other, _ := New(bytes.Repeat([]byte{8}, 32))
	if _, err := other.Open(c2); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("Open with another key = %v, want ErrDecrypt", err)
	}
	if _, err := b.Open([]byte("short")); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("Open(short) = %v, want ErrDecrypt", err)
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("New accepted a short key")
	}
}
