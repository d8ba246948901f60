//go:build edge

package translate

// edgeBuild forces Options.Edge: no live keepalives (the platform buffers the response body).
const edgeBuild = true
