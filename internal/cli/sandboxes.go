package cli

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
)

// kindOrDefault is the sandbox kind --sandbox names ("": the default).
func kindOrDefault(name string) string {
	if name == "" {
		return sandbox.DefaultKind
	}
	return name
}

// sandboxNames lists the kinds for help and errors.
func (f *Factory) sandboxNames() string { return strings.Join(f.Sandboxes.Names(), ", ") }

// addKindFlags registers every kind's own flags on fl (with reap, only
// those gc takes), each once, its help naming the kinds that take it; it
// returns where their values go.
func addKindFlags(f *Factory, fl *pflag.FlagSet, reap bool) map[string]*string {
	type flag struct {
		usage string
		kinds []string
	}
	flags := map[string]*flag{}
	var order []string
	for _, k := range f.Sandboxes.Sorted() {
		for _, kf := range k.Flags {
			if reap && !kf.Reap {
				continue
			}
			if flags[kf.Name] == nil {
				flags[kf.Name] = &flag{usage: kf.Usage}
				order = append(order, kf.Name)
			}
			flags[kf.Name].kinds = append(flags[kf.Name].kinds, k.Name)
		}
	}
	values := map[string]*string{}
	for _, name := range order {
		fg := flags[name]
		values[name] = fl.String(name, "", "with --sandbox "+strings.Join(fg.kinds, " or ")+": "+fg.usage)
	}
	return values
}

// kindSettings are the values of the kind flags given.
func kindSettings(values map[string]*string) map[string]string {
	out := map[string]string{}
	for name, v := range values {
		if *v != "" {
			out[name] = *v
		}
	}
	return out
}

// ensureTaskImage builds (or finds) the task image of contextDir's
// dockerfile for the leases of the kind named kind ("": the default), on
// the engine its row's TaskImages names.
func (f *Factory) ensureTaskImage(ctx context.Context, kind, contextDir, dockerfile string, out io.Writer) (tag string, built bool, err error) {
	k := f.Sandboxes[kindOrDefault(kind)]
	if k.TaskImages == nil {
		var with []string
		for _, o := range f.Sandboxes.Sorted() {
			if o.TaskImages != nil {
				with = append(with, o.Name)
			}
		}
		return "", false, outposterr.New(outposterr.Configuration,
			"the %s sandbox runs no image, so it cannot run a task's environment: run in a sandbox that does (%s)",
			kindOrDefault(kind), strings.Join(with, ", "))
	}
	return k.TaskImages.Ensure(ctx, f.Getenv, contextDir, dockerfile, Version, out)
}
