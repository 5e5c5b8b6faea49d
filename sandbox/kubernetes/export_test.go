package kubernetes

// WrapperArgv is the argv and the input header the provider runs for a
// command (no env, no workspace watch), for the benchmarks that time the
// wrapper over a raw exec.
func WrapperArgv(nonce string, args ...string) ([]string, []byte) {
	argv := append([]string{"sh", "-c", wrapperScript, "outpost-exec", "/tmp/outpost-bench-" + nonce, Root, "0"}, args...)
	return argv, header(nonce, nil)
}

// ContainerName is the lease container's name.
const ContainerName = containerName
