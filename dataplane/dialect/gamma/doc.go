// Package gamma is the gamma generate content dialect (GenerateContent): its wire types, the request and
// response decoders and encoders to and from the canonical form (dataplane/canon), the stream chunk decoder
// (with its fast reader) and encoder (SSE or one JSON array), and the usage members.
package gamma
