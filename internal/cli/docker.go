package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/internal/version"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox"
	"github.com/outpost-dev/outpost/sandbox/kinds"
)

// NewCmdGC builds `outpost gc`.
func NewCmdGC(f *Factory) *cobra.Command {
	var dryRun, images bool
	var grace time.Duration
	var kind string
	var settings map[string]*string
	var defaults, named, swept []string
	for _, k := range f.Sandboxes.Sorted() {
		if k.Reap == nil {
			continue
		}
		named = append(named, k.Name)
		item := k.Name
		if k.ReapDefault {
			defaults = append(defaults, k.Name)
		} else {
			item += " (with --sandbox " + k.Name + ")"
		}
		swept = append(swept, wrapItem(item+": "+cmp.Or(k.ReapHelp, "what its leases left")+",", 88))
	}
	cmd := &cobra.Command{
		Use:   "gc [--dry-run] [--sandbox KIND] [--images]",
		Short: "Remove sandbox leftovers that no live outpost process owns",
		Long: `gc removes what runs that died without cleaning up left behind (kill -9, a crash, a
lost machine) in the sandbox kinds ` + strings.Join(defaults, " and ") + ` (--sandbox KIND: in KIND instead;
one of ` + strings.Join(named, ", ") + `), kind by kind:

` + strings.Join(swept, "\n") + `

whose owning outpost process is gone (or, for resources of another host or without an
owner record, older than --grace). Resources of runs still going on are left alone.
--images also removes the task images batch built from jobs' environments
(labelled dev.outpost.task-image, on the engine they were built on), except those
a container still uses.
An unreachable engine is reported (exit 7) after the other kinds are swept.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if grace < 0 {
				return &flagError{fmt.Errorf("--grace must be 0 or more, not %s", grace)}
			}
			sweep, err := gcKinds(f, kind, named)
			if err != nil {
				return err
			}
			imaging := f.Sandboxes[kindOrDefault(kind)]
			if images && imaging.TaskImages == nil {
				return &flagError{fmt.Errorf("--images: the %s sandbox has no task images", kindOrDefault(kind))}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			found := 0
			var errs []error
			// list prints what a sweep found and keeps its error.
			list := func(left []sandbox.Leftover, err error) {
				for _, l := range left {
					found++
					state := "left over"
					if l.Removed {
						state = "removed"
					}
					fmt.Fprintf(f.IO.Out, "%s %s\n", state, l.What)
				}
				errs = append(errs, err)
			}
			for _, k := range sweep {
				list(k.Reap(ctx, sandbox.ReapConfig{Settings: kindSettings(settings), Getenv: f.Getenv,
					DryRun: dryRun, Grace: grace, Version: Version}))
			}
			if images {
				list(imaging.TaskImages.Remove(ctx, f.Getenv, dryRun))
			}
			err = errors.Join(errs...)
			if found == 0 && err == nil {
				fmt.Fprintln(f.IO.Out, "no leftovers")
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list leftovers without removing them")
	cmd.Flags().BoolVar(&images, "images", false, "also remove the task images built from jobs' environments (outpost-task:…)")
	cmd.Flags().DurationVar(&grace, "grace", sandbox.DefaultReapGrace, "age after which resources of unknown owners count as left over")
	cmd.Flags().StringVar(&kind, "sandbox", "", "sweep this sandbox kind: "+strings.Join(named, ", ")+" (default: "+strings.Join(defaults, " and ")+")")
	settings = addKindFlags(f, cmd.Flags(), true)
	return cmd
}

// wrapItem formats text as a list item ("  - text") wrapped at width
// columns, its continuation lines indented under the text.
func wrapItem(text string, width int) string {
	var b strings.Builder
	line := "  -"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > width && len(line) > len("    ") {
			b.WriteString(line + "\n")
			line = "   "
		}
		line += " " + w
	}
	b.WriteString(line)
	return b.String()
}

// gcKinds are the kinds gc sweeps: those swept by default, or the one
// --sandbox names (a kind swept by default brings the others along).
func gcKinds(f *Factory, name string, named []string) ([]sandbox.Kind, error) {
	var out []sandbox.Kind
	if name != "" {
		k, ok := f.Sandboxes[name]
		if !ok || k.Reap == nil {
			return nil, &flagError{fmt.Errorf("--sandbox must be one of %s for gc, not %q", strings.Join(named, ", "), name)}
		}
		if !k.ReapDefault {
			return []sandbox.Kind{k}, nil
		}
	}
	for _, k := range f.Sandboxes.Sorted() {
		if k.Reap != nil && k.ReapDefault {
			out = append(out, k)
		}
	}
	return out, nil
}

// NewCmdImage builds `outpost image`.
func NewCmdImage(f *Factory) *cobra.Command {
	img := &cobra.Command{Use: "image", Short: "Manage the sandbox image"}
	var dir, tag, from string
	var with []string
	var release, withGateway bool
	build := &cobra.Command{
		Use:   "build [--dir .outpost] [--tag outpost/base:dev] | [--with " + strings.Join(defaultCLIs(f.Agents()), ",") + "] [--with-gateway] [--from IMAGE] [--tag T]",
		Short: "Build the sandbox image from the project's recipe (.outpost/Dockerfile), or one with the verified CLIs baked in",
		Long: `build sends the recipe directory (default .outpost, honouring its .dockerignore)
to the Docker engine and builds the sandbox image. The base debian:bookworm-slim must
be present; scripts/docker-setup.sh creates it offline with debootstrap when no image
registry is reachable.

With --with, it builds an image FROM --from (default the sandbox image) holding the
named CLIs' verified cache entries (bootstrapped first when missing) at the path a
lease looks for them, labelled ` + bootstrap.LabelBaked + `. A lease on such an image
(--image) skips delivery: the CLI is found there, its version checked, nothing copied —
what a Kubernetes cluster or a remote engine wants instead of a copy per lease.

With --with-gateway (alone or with --with), the image also holds this outpost
executable at ` + sandbox.BakedGateway + ` (labelled ` + bootstrap.LabelGateway + ` with its version and
SHA-256): a Kubernetes pod on it runs the model gateway sidecar from there instead of
a copy per pod, when the file is byte for byte the outpost that runs the turn (else it
is copied as before). It needs a Linux outpost built for the image's architecture.

--release tags the image with this outpost's version instead of --tag:
` + releaseImageTag(sandbox.DefaultImage, "vX.Y.Z", false) + ` (with --with: ` + releaseImageTag(sandbox.DefaultImage, "vX.Y.Z", true) + `).`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			contextDir, dockerfile := "", "Dockerfile"
			if release {
				if cmd.Flags().Changed("tag") {
					return &flagError{fmt.Errorf("--release derives the tag from the version: give one of --tag and --release")}
				}
				tag = releaseImageTag(sandbox.DefaultImage, Version, len(with) > 0 || withGateway)
			}
			if len(with) > 0 || withGateway {
				if cmd.Flags().Changed("dir") {
					return &flagError{fmt.Errorf("--with and --with-gateway build FROM --from, not from a recipe directory: give one of --dir and --with")}
				}
				var gw bootstrap.Gateway
				if withGateway {
					self, err := gatewaySelf(f)
					if err != nil {
						return err
					}
					gw = bootstrap.Gateway{Binary: self, Version: Version + " " + version.Commit()}
				}
				if !cmd.Flags().Changed("tag") && !release {
					tag = sandbox.DefaultImage + "-clis"
				}
				tmp, err := os.MkdirTemp("", "outpost-bake-")
				if err != nil {
					return outposterr.Wrap(outposterr.Bootstrap, err, "build context")
				}
				defer os.RemoveAll(tmp)
				var entries []*bootstrap.Entry
				if len(with) > 0 {
					b, err := newBootstrapper(ctx, f, BootstrapOptions{})
					if err != nil {
						return err
					}
					for _, name := range with {
						e, err := b.Ensure(ctx, strings.TrimSpace(name))
						if err != nil {
							return err
						}
						entries = append(entries, e)
					}
				}
				if dockerfile, err = bootstrap.WriteBakeContextWithGateway(tmp, from, gw, entries...); err != nil {
					return err
				}
				contextDir = tmp
			} else {
				abs, err := filepath.Abs(dir)
				if err != nil {
					return outposterr.Wrap(outposterr.Configuration, err, "recipe directory")
				}
				if _, err := os.Stat(filepath.Join(abs, "Dockerfile")); err != nil {
					return outposterr.Wrap(outposterr.Configuration, err, "no Dockerfile in %s", abs)
				}
				contextDir = abs
			}
			if err := kinds.BuildImage(ctx, f.Getenv, contextDir, dockerfile, tag, f.IO.ErrOut); err != nil {
				return err
			}
			fmt.Fprintln(f.IO.Out, tag)
			return nil
		},
	}
	build.Flags().StringVar(&dir, "dir", ".outpost", "recipe directory holding the Dockerfile")
	build.Flags().StringVar(&tag, "tag", sandbox.DefaultImage, "image tag (with --with or --with-gateway: "+sandbox.DefaultImage+"-clis)")
	build.Flags().StringSliceVar(&with, "with", nil, "bake these pinned CLIs (verified cache entries) into an image FROM --from: "+strings.Join(defaultCLIs(f.Agents()), ","))
	build.Flags().BoolVar(&withGateway, "with-gateway", false, "also bake this outpost executable in, for the Kubernetes gateway sidecar (at "+sandbox.BakedGateway+")")
	build.Flags().BoolVar(&release, "release", false, "tag the image with this outpost's version ("+releaseImageTag(sandbox.DefaultImage, Version, false)+", with --with "+releaseImageTag(sandbox.DefaultImage, Version, true)+")")
	build.Flags().StringVar(&from, "from", sandbox.DefaultImage, "with --with or --with-gateway: the image to start from")
	img.AddCommand(build)
	return img
}

// gatewaySelf is this outpost executable, to bake in for the gateway
// sidecar: a pod runs it only when it is a Linux build.
func gatewaySelf(f *Factory) (string, error) {
	if runtime.GOOS != "linux" {
		return "", &flagError{fmt.Errorf("--with-gateway bakes this outpost executable in, a %s build that a Linux pod cannot run: run image build with a Linux outpost", runtime.GOOS)}
	}
	if f.Self == nil {
		return "", outposterr.New(outposterr.Configuration, "--with-gateway: this outpost executable cannot be found")
	}
	self, err := f.Self()
	if err != nil {
		return "", outposterr.Wrap(outposterr.Configuration, err, "--with-gateway: this outpost executable")
	}
	return self, nil
}

// releaseImageTag is the tag a release gives the sandbox image built from
// the recipe (baked false) or with the pinned CLIs baked in: the repository
// of image (default outpost/base) with the version as its tag, characters a
// tag cannot hold replaced by '-'.
func releaseImageTag(image, version string, baked bool) string {
	repo := image
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo = image[:i]
	}
	tag := []byte(version)
	for i, c := range tag {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			tag[i] = '-'
		}
	}
	t := strings.TrimLeft(string(tag), ".-")
	if t == "" {
		t = "unknown"
	}
	if baked {
		t += "-clis"
	}
	return repo + ":" + t
}
