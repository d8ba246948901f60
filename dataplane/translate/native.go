//go:build !edge

package translate

// edgeBuild is false on native servers: live keepalives are sent unless Options.Edge is set.
const edgeBuild = false
