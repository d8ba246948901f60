package snapshot

import (
	"testing"

	"google.golang.org/protobuf/proto"

	configv1 "github.com/tollgate/tollgate/shared/gen/tollgate/config/v1"
	"github.com/tollgate/tollgate/shared/vocab"
)

// TestCloudProvidersCompile: a snapshot with providers of the cloud channel types compiles (a data plane
// must not refuse the whole snapshot), keeps their settings and credentials, and their dispatching cells
// read as unsupported in this build while local cells are served.
func TestCloudProvidersCompile(t *testing.T) {
	s := validSnapshot()
	const secret = `{"access_key_id":"AKIA1","secret_access_key":"s"}`
	for i, ch := range []vocab.ChannelType{vocab.ChannelAWSBedrock, vocab.ChannelGCPVertex, vocab.ChannelAzureOpenAI} {
		id := int64(20 + i)
		s.Providers = append(s.Providers, &configv1.Provider{Id: id, Name: string(ch), ChannelType: string(ch),
			BaseUrl: "https://cloud.example", Enabled: true, SettingsJson: `{"region":"us-east-1"}`,
			Credentials: []*configv1.Credential{{Id: id, ProviderId: id, Secret: secret, Weight: 1, Enabled: true}}})
		s.RoutingRules = append(s.RoutingRules,
			&configv1.RoutingRule{Id: 100 + id, ProviderId: id, Operation: "generate_content", Kind: "beta_messages", Implementation: "passthrough", Enabled: true},
			&configv1.RoutingRule{Id: 200 + id, ProviderId: id, Operation: "generate_content", Kind: "alpha_chat_completions", Implementation: "transform_to",
				DestKind: proto.String("beta_messages"), Enabled: true},
			&configv1.RoutingRule{Id: 300 + id, ProviderId: id, Operation: "get_model", Kind: "alpha", Implementation: "local", Enabled: true})
	}
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile with cloud providers = %v", err)
	}
	for i, ch := range []vocab.ChannelType{vocab.ChannelAWSBedrock, vocab.ChannelGCPVertex, vocab.ChannelAzureOpenAI} {
		id := int64(20 + i)
		p := c.Provider(id)
		if p == nil || p.Channel != ch || string(p.Settings) != `{"region":"us-east-1"}` || len(p.Credentials) != 1 || p.Credentials[0].Secret != secret {
			t.Fatalf("Provider(%d) = %+v", id, p)
		}
		if got := p.Cell(vocab.OpGenerateContent, vocab.KindBetaMessages); got.Impl != vocab.ImplUnsupported || got.RuleID != 100+id {
			t.Errorf("%s passthrough cell = %+v, want unsupported (rule %d) in this build", ch, got, 100+id)
		}
		if got := p.Cell(vocab.OpGenerateContent, vocab.KindAlphaChatCompletions); got.Impl != vocab.ImplUnsupported {
			t.Errorf("%s transform_to cell = %+v, want unsupported in this build", ch, got)
		}
		if got := p.Cell(vocab.OpGetModel, vocab.KindAlpha); got.Impl != vocab.ImplLocal {
			t.Errorf("%s local cell = %+v, want local", ch, got)
		}
	}
	// First-party channels keep their cells.
	if got := c.Provider(1).Cell(vocab.OpGenerateContent, vocab.KindAlphaChatCompletions); got.Impl != vocab.ImplPassthrough {
		t.Errorf("alpha passthrough cell = %+v", got)
	}
	s.Providers = append(s.Providers, &configv1.Provider{Id: 30, Name: "x", ChannelType: "aws", BaseUrl: "https://x.example", Enabled: true})
	if _, err := Compile(s); err == nil {
		t.Error("an unknown channel type compiled")
	}
}
