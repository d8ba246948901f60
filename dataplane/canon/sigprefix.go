package canon

// RespSigPrefix marks a thinking signature that carries an alpha responses reasoning item (id and
// encrypted_content) through a beta or gamma client, so it can be replayed to an alpha responses upstream.
const RespSigPrefix = "tgrs1."
