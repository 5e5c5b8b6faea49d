package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/outpost-dev/outpost/bootstrap"
	"github.com/outpost-dev/outpost/outposterr"
	"github.com/outpost-dev/outpost/sandbox/docker"
	"github.com/outpost-dev/outpost/sandbox/host"
	"github.com/outpost-dev/outpost/sandbox/kubernetes"
)

// NewCmdGC builds `outpost gc`.
func NewCmdGC(f *Factory) *cobra.Command {
	var dryRun bool
	var grace time.Duration
	var kube SandboxOptions
	cmd := &cobra.Command{
		Use:   "gc [--dry-run]",
		Short: "Remove sandbox leftovers (Docker resources, host sandbox homes) that no live outpost process owns",
		Long: `gc removes what runs that died without cleaning up left behind (kill -9, a crash, a
lost machine):

  - containers, volumes and networks labelled dev.outpost.managed on the Docker engine
    (DOCKER_HOST), and
  - host sandbox lease directories (` + host.LeasePrefix + `* in the temporary directory,
    holding private homes with logins and transcripts) of this user,

whose owning outpost process is gone (or, for resources of another host or without an
owner record, older than --grace). Resources of runs still going on are left alone.
An unreachable engine is reported (exit 7) after the host sandbox is swept.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if grace < 0 {
				return &flagError{fmt.Errorf("--grace must be 0 or more, not %s", grace)}
			}
			switch kube.Kind {
			case "", "docker":
			case "kubernetes":
				return gcKubernetes(cmd.Context(), f, kube, dryRun, grace)
			default:
				return &flagError{fmt.Errorf("--sandbox must be docker or kubernetes for gc, not %q", kube.Kind)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Minute)
			defer cancel()
			found := 0
			state := func(removed bool) string {
				if removed {
					return "removed"
				}
				return "left over"
			}
			homes, hostErr := host.Reap(ctx, host.ReapOptions{DryRun: dryRun, Grace: grace})
			for _, l := range homes {
				found++
				fmt.Fprintf(f.IO.Out, "%s host sandbox %s (%s)\n", state(l.Removed), l.Path, l.Reason)
			}
			left, dockerErr := reapDocker(ctx, f, docker.ReapOptions{DryRun: dryRun, Grace: grace})
			for _, l := range left {
				found++
				fmt.Fprintf(f.IO.Out, "%s %s %s (%s): %s\n", state(l.Removed), l.Kind, shortName(l), l.Reason, l.Labels[docker.LabelRun])
			}
			if found == 0 && dockerErr == nil && hostErr == nil {
				fmt.Fprintln(f.IO.Out, "no leftovers")
			}
			return errors.Join(dockerErr, hostErr)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list leftovers without removing them")
	cmd.Flags().DurationVar(&grace, "grace", docker.DefaultReapGrace, "age after which resources of unknown owners count as left over")
	cmd.Flags().StringVar(&kube.Kind, "sandbox", "", "docker (default) or kubernetes: pods and Secrets in every namespace the kubeconfig may list")
	cmd.Flags().StringVar(&kube.Kubeconfig, "kubeconfig", "", "with --sandbox kubernetes: the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	cmd.Flags().StringVar(&kube.Context, "context", "", "with --sandbox kubernetes: the kubeconfig context")
	return cmd
}

// gcKubernetes removes pods and Secrets whose owning outpost process is gone.
func gcKubernetes(ctx context.Context, f *Factory, o SandboxOptions, dryRun bool, grace time.Duration) error {
	path := kubeconfig(f, o.Kubeconfig)
	if path == "" {
		return outposterr.New(outposterr.Configuration, "gc --sandbox kubernetes needs a kubeconfig (--kubeconfig or KUBECONFIG)")
	}
	p, err := kubernetes.New(ctx, kubernetes.Options{Kubeconfig: path, Context: o.Context, Version: Version})
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	left, err := p.Reap(ctx, kubernetes.ReapOptions{DryRun: dryRun, Grace: grace})
	for _, l := range left {
		state := "removed"
		if !l.Removed {
			state = "left over"
		}
		fmt.Fprintf(f.IO.Out, "%s %s %s/%s (%s)\n", state, l.Kind, l.Namespace, l.Name, l.Reason)
	}
	if len(left) == 0 {
		fmt.Fprintln(f.IO.Out, "no leftovers")
	}
	return err
}

// reapDocker sweeps the engine at DOCKER_HOST; an unreachable engine is a
// sandbox error that says so.
func reapDocker(ctx context.Context, f *Factory, opts docker.ReapOptions) ([]docker.Leftover, error) {
	ep, err := dockerEndpoint(f)
	if err != nil {
		return nil, err
	}
	cli, err := docker.NewEndpointClient(ep)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, docker.DefaultPingTimeout)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		return nil, outposterr.Wrap(outposterr.Sandbox, err, "docker engine unreachable at %s, nothing swept there (is dockerd running?)", cli.DaemonHost())
	}
	return docker.Reap(ctx, cli, opts)
}

func shortName(l docker.Leftover) string {
	if l.Name != "" {
		return l.Name
	}
	if len(l.ID) > 12 {
		return l.ID[:12]
	}
	return l.ID
}

// NewCmdImage builds `outpost image`.
func NewCmdImage(f *Factory) *cobra.Command {
	img := &cobra.Command{Use: "image", Short: "Manage the sandbox image"}
	var dir, tag, from string
	var with []string
	build := &cobra.Command{
		Use:   "build [--dir .outpost] [--tag outpost/base:dev] | --with " + strings.Join(defaultCLIs(f.Agents()), ",") + " [--from IMAGE] [--tag T]",
		Short: "Build the sandbox image from the project's recipe (.outpost/Dockerfile), or one with the verified CLIs baked in",
		Long: `build sends the recipe directory (default .outpost, honouring its .dockerignore)
to the Docker engine and builds the sandbox image. The base debian:bookworm-slim must
be present; scripts/docker-setup.sh creates it offline with debootstrap when no image
registry is reachable.

With --with, it builds an image FROM --from (default the sandbox image) holding the
named CLIs' verified cache entries (bootstrapped first when missing) at the path a
lease looks for them, labelled ` + bootstrap.LabelBaked + `. A lease on such an image
(--image) skips delivery: the CLI is found there, its version checked, nothing copied —
what a Kubernetes cluster or a remote engine wants instead of a copy per lease.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			contextDir, dockerfile := "", "Dockerfile"
			if len(with) > 0 {
				if cmd.Flags().Changed("dir") {
					return &flagError{fmt.Errorf("--with builds FROM --from, not from a recipe directory: give one of --dir and --with")}
				}
				if !cmd.Flags().Changed("tag") {
					tag = docker.DefaultImage + "-clis"
				}
				tmp, err := os.MkdirTemp("", "outpost-bake-")
				if err != nil {
					return outposterr.Wrap(outposterr.Bootstrap, err, "build context")
				}
				defer os.RemoveAll(tmp)
				b, err := newBootstrapper(ctx, f, BootstrapOptions{})
				if err != nil {
					return err
				}
				var entries []*bootstrap.Entry
				for _, name := range with {
					e, err := b.Ensure(ctx, strings.TrimSpace(name))
					if err != nil {
						return err
					}
					entries = append(entries, e)
				}
				if dockerfile, err = bootstrap.WriteBakeContext(tmp, from, entries...); err != nil {
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
			ep, err := dockerEndpoint(f)
			if err != nil {
				return err
			}
			cli, err := docker.NewEndpointClient(ep)
			if err != nil {
				return err
			}
			defer cli.Close()
			if err := docker.BuildImage(ctx, cli, contextDir, dockerfile, tag, f.IO.ErrOut); err != nil {
				return err
			}
			fmt.Fprintln(f.IO.Out, tag)
			return nil
		},
	}
	build.Flags().StringVar(&dir, "dir", ".outpost", "recipe directory holding the Dockerfile")
	build.Flags().StringVar(&tag, "tag", docker.DefaultImage, "image tag (with --with: "+docker.DefaultImage+"-clis)")
	build.Flags().StringSliceVar(&with, "with", nil, "bake these pinned CLIs (verified cache entries) into an image FROM --from: "+strings.Join(defaultCLIs(f.Agents()), ","))
	build.Flags().StringVar(&from, "from", docker.DefaultImage, "with --with: the image to start from")
	img.AddCommand(build)
	return img
}
