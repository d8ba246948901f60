package snapshot

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
)

// Among enough keys to use the bucket table, every key is found by its hash and by its id, a rotated
// key's previous hash finds its previous entry, and an unknown hash or id finds nothing.
func TestKeyIndexManyKeys(t *testing.T) {
	const n = 5000
	end := time.Unix(1760003600, 0).UTC()
	s := validSnapshot()
	sum := func(f string, i int) []byte { h := sha256.Sum256(fmt.Appendf(nil, f, i)); return h[:] }
	for i := 1; i <= n; i++ {
		k := &configv1.ApiKey{Id: int64(1000 + i), UserId: 6, OrgId: 7, Name: fmt.Sprintf("key-%d", i), KeyHash: sum("key-%d", i),
			Prefix: fmt.Sprintf("tg-%d", i), Enabled: i%7 != 0, RpmLimit: int32(i)}
		if i%3 == 0 {
			k.AllowedModels = []string{"chat", "gpt-*"}
		}
		if i%10 == 0 {
			k.PreviousKeyHash, k.PreviousPrefix, k.PreviousExpiresAt = sum("old-%d", i), fmt.Sprintf("tg-old-%d", i), timestamppb.New(end)
		}
		s.ApiKeys = append(s.ApiKeys, k)
	}
	c, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		k := c.LookupKey(fmt.Sprintf("key-%d", i))
		if k == nil || k.ID != int64(1000+i) || k.Name != fmt.Sprintf("key-%d", i) || k.Prefix != fmt.Sprintf("tg-%d", i) ||
			k.Previous || k.Enabled != (i%7 != 0) || k.RPMLimit != int32(i) || !k.ExpiresAt.IsZero() {
			t.Fatalf("key %d by hash: %+v", i, k)
		}
		if byID := c.KeyByID(int64(1000 + i)); byID != k {
			t.Fatalf("key %d by id: %+v, want the entry of its hash", i, byID)
		}
		if !k.Allows("gpt-4o") || !k.Allows("chat") || k.Allows("other") != (i%3 != 0) || len(k.AllowedModels()) != map[bool]int{true: 2}[i%3 == 0] {
			t.Fatalf("key %d allowed models %v", i, k.AllowedModels())
		}
		prev := c.LookupKey(fmt.Sprintf("old-%d", i))
		if i%10 != 0 {
			if prev != nil {
				t.Fatalf("key %d: previous entry %+v without a rotation", i, prev)
			}
			continue
		}
		if prev == nil || prev.ID != k.ID || !prev.Previous || prev.Prefix != fmt.Sprintf("tg-old-%d", i) || !prev.ExpiresAt.Equal(end) ||
			prev.Name != k.Name {
			t.Fatalf("key %d previous entry: %+v", i, prev)
		}
	}
	if c.LookupKey("key-0") != nil || c.LookupKey("") != nil || c.KeyByID(999) != nil || c.KeyByID(1000+n+1) != nil {
		t.Fatal("an unknown secret or id found a key")
	}
	if k := c.LookupKey("tg-secret"); k == nil || k.ID != 5 || c.KeyByID(5) != k {
		t.Fatalf("validSnapshot's key: %+v", k)
	}
}

// A hash used twice, as a key's hash or as a rotated key's previous hash, fails the snapshot naming the
// later entry and the key that has it.
func TestKeyIndexDuplicateHash(t *testing.T) {
	for name, tc := range map[string]struct {
		key  func(h []byte) *configv1.ApiKey
		want string
	}{
		"key_hash": {func(h []byte) *configv1.ApiKey {
			return &configv1.ApiKey{Id: 9, KeyHash: h, Prefix: "tg-dup", Enabled: true}
		}, `api key 9 ("tg-dup"): key_hash: already used by api key 5`},
		"previous_key_hash": {func(h []byte) *configv1.ApiKey {
			other := sha256.Sum256([]byte("other"))
			return &configv1.ApiKey{Id: 9, KeyHash: other[:], Prefix: "tg-dup", Enabled: true, PreviousKeyHash: h,
				PreviousPrefix: "tg-p", PreviousExpiresAt: timestamppb.New(time.Unix(1760003600, 0))}
		}, `api key 9 ("tg-dup"): previous_key_hash: already used by api key 5`},
	} {
		t.Run(name, func(t *testing.T) {
			s := validSnapshot()
			s.ApiKeys = append(s.ApiKeys, tc.key(s.ApiKeys[0].KeyHash))
			_, err := Compile(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Compile: %v, want %q", err, tc.want)
			}
		})
	}
}

// A snapshot naming one key id twice (only a hand-made one can: ids are primary keys) answers by id with
// the later key, and finds both by hash.
func TestKeyIndexRepeatedID(t *testing.T) {
	s := validSnapshot()
	h := sha256.Sum256([]byte("later"))
	s.ApiKeys = append(s.ApiKeys, &configv1.ApiKey{Id: 5, KeyHash: h[:], Prefix: "later", Enabled: true})
	c, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	if k := c.KeyByID(5); k == nil || k.Prefix != "later" {
		t.Fatalf("KeyByID(5) = %+v, want the later key", k)
	}
	if c.LookupKey("tg-secret") == nil || c.LookupKey("later") == nil {
		t.Fatal("a key of the repeated id is not found by hash")
	}
}
