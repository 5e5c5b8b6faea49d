package docker

import (
	"context"

	"github.com/docker/docker/api/types/container"
)

// A lease must not outlive the process that holds it, even one killed
// with SIGKILL, which runs no cleanup. So a container's main process (the
// keeper, behind the engine's init) does nothing but read its standard
// input, and ends at its end; the provider attaches to that input when it
// starts the container and holds the attach connection, writing nothing,
// until Release. The container is created with StdinOnce, so the engine
// closes the keeper's input when that one client goes away, and with
// AutoRemove, so the engine removes the container once the keeper ended.
// When the owning process dies, the kernel closes its connection to the
// engine (for an ssh:// engine, the ssh process sees its input end and
// closes the far side's), the engine closes the keeper's input, the keeper
// exits, the init ends the container's other processes and the engine
// removes it: seconds, with nobody running `outpost gc`.

// keeperScript is a lease's main process: it says on its standard
// output whether it can run a command itself (see keeperrun.go), then reads
// its input (the lifeline) until it ends, and ends then. The only thing
// ever written on that input is one request to run a command: a line
// "outpost-run N" and N bytes of shell that the provider generated.
const keeperScript = `if command -v head >/dev/null 2>&1; then echo ` + keeperRuns + `; else echo ` + keeperExecs + `; fi
while read -r w n; do if [ "$w" = outpost-run ]; then eval "$(head -c "$n")"; fi; done`

// The keeper's first line on its standard output.
const (
	keeperRuns  = "outpost-keeper-runs"
	keeperExecs = "outpost-keeper-execs"
)

// attachLifeline attaches to the container's standard input and keeps the
// connection in l; the channel reports the attach's error (nil once the
// lifeline is held). With output (Docker, and a Podman lease with forwards,
// whose entrypoint reports there when they listen) the caller waits for it
// before starting the container, so nothing written is missed, and reads
// the stream from l.life; on Podman it waits too (see startContainer).
func (l *lease) attachLifeline(ctx context.Context, output bool) <-chan error {
	done := make(chan error, 1)
	go func() {
		actx, cancel := l.p.opCtx(context.WithoutCancel(ctx))
		defer cancel()
		// The context bounds the dial and the upgrade only: the
		// connection it returns lives until it is closed.
		hr, err := l.p.cli.ContainerAttach(actx, l.id, container.AttachOptions{Stream: true, Stdin: true, Stdout: output, Stderr: output})
		if err != nil {
			done <- l.p.engineError(err, "attach to container %s", shortID(l.id))
			return
		}
		l.lifeMu.Lock()
		l.lifeline = hr.Conn
		l.life = newLifeStream(hr.Reader)
		l.lifeMu.Unlock()
		done <- nil
	}()
	return done
}

// holdsLifeline reports whether the lease holds its lifeline.
func (l *lease) holdsLifeline() bool {
	l.lifeMu.Lock()
	defer l.lifeMu.Unlock()
	return l.lifeline != nil
}

// cutLifeline closes the lifeline, if the lease holds one: the keeper's
// input ends, and the container ends and removes itself.
func (l *lease) cutLifeline() {
	l.lifeMu.Lock()
	defer l.lifeMu.Unlock()
	if l.lifeline != nil {
		_ = l.lifeline.Close()
		l.lifeline = nil
	}
}
