// Package alpha is the alpha dialect family: chat completions (Chat) and responses (Responses). For each it
// owns the wire types, the request and response decoders and encoders to and from the canonical form
// (dataplane/canon), the stream event decoder (with its fast reader) and encoder, the usage members, and
// the rules it imposes as a destination (responses has no stop sequences).
package alpha
