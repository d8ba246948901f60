// Package beta is the beta messages dialect (Messages): its wire types, the request and response decoders
// and encoders to and from the canonical form (dataplane/canon), the stream event decoder (with its fast
// reader) and encoder, the usage members, and the rules it imposes as a destination (no JSON output
// without a schema).
package beta
