// Package sdktest holds the tests in which the official client SDKs (openai-go, anthropic-sdk-go,
// google.golang.org/genai) parse what package translate produces: translated responses, streams,
// mid-stream errors, synthesised streams with every keepalive form, and error responses. It is a separate
// package so that the translate test binary (and its fuzzers) do not link the SDKs.
package sdktest
