package bootstrap

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/outpost-dev/outpost/outposterr"
)

func TestNPMConfigResolve(t *testing.T) {
	const (
		home    = "/home/u"
		project = "/work/p"
	)
	tests := []struct {
		name    string
		setting string
		env     map[string]string
		files   map[string]string
		npm     string
		npmErr  error
		want    Registry
		wantErr string
	}{
		{
			name:    "setting wins",
			setting: "https://setting.example/npm",
			env:     map[string]string{"NPM_CONFIG_REGISTRY": "https://env.example/"},
			want:    Registry{URL: "https://setting.example/npm/"},
		},
		{
			name:  "upper-case environment",
			env:   map[string]string{"NPM_CONFIG_REGISTRY": "https://env.example"},
			files: map[string]string{home + "/.npmrc": "registry=https://user.example/"},
			want:  Registry{URL: "https://env.example/"},
		},
		{
			name: "lower-case environment",
			env:  map[string]string{"npm_config_registry": "http://localhost:4873/"},
			want: Registry{URL: "http://localhost:4873/"},
		},
		{
			name: "project over user",
			files: map[string]string{
				project + "/.npmrc": "# comment\nregistry = \"https://project.example/\"\n",
				home + "/.npmrc":    "registry=https://user.example/\n@openai:registry=https://user-openai.example/\n",
			},
			want: Registry{URL: "https://project.example/", Scopes: map[string]string{"@openai": "https://user-openai.example/"}},
		},
		{
			name: "scopes merge, project wins",
			files: map[string]string{
				project + "/.npmrc": "@github:registry=https://project-gh.example/",
				home + "/.npmrc":    "; ini comment\n@github:registry=https://user-gh.example/\n@anthropic-ai:registry=https://user-a.example/\nregistry=https://user.example/",
			},
			want: Registry{URL: "https://user.example/", Scopes: map[string]string{
				"@github": "https://project-gh.example/", "@anthropic-ai": "https://user-a.example/",
			}},
		},
		{
			name:  "userconfig variable and ${VAR} expansion",
			env:   map[string]string{"NPM_CONFIG_USERCONFIG": "/etc/custom-npmrc", "MIRROR": "mirror.example"},
			files: map[string]string{"/etc/custom-npmrc": "registry=https://${MIRROR}/npm/", home + "/.npmrc": "registry=https://ignored.example/"},
			want:  Registry{URL: "https://mirror.example/npm/"},
		},
		{
			name: "npm config get as last resort",
			npm:  "https://npm-cli.example/\n",
			want: Registry{URL: "https://npm-cli.example/"},
		},
		{
			name:  "files before npm config get",
			files: map[string]string{home + "/.npmrc": "registry=https://user.example/"},
			npm:   "https://npm-cli.example/\n",
			want:  Registry{URL: "https://user.example/"},
		},
		{
			name:    "nothing configured",
			npm:     "undefined\n",
			wantErr: "nothing configured",
		},
		{
			name:    "npm fails",
			npmErr:  errors.New("exec: npm: not found"),
			wantErr: "npm: not found",
		},
		{
			name:    "not a URL",
			env:     map[string]string{"NPM_CONFIG_REGISTRY": "registry.example"},
			wantErr: "not an http(s) URL",
		},
		{
			name:  "bad value falls through to the next source",
			env:   map[string]string{"NPM_CONFIG_REGISTRY": "ftp://x"},
			files: map[string]string{home + "/.npmrc": "registry=https://user.example/"},
			want:  Registry{URL: "https://user.example/"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := NPMConfig{
				Setting: tc.setting,
				Getenv:  func(k string) string { return tc.env[k] },
				Dir:     project,
				Home:    home,
				ReadFile: func(name string) ([]byte, error) {
					if s, ok := tc.files[filepath.ToSlash(name)]; ok {
						return []byte(s), nil
					}
					return nil, fs.ErrNotExist
				},
			}
			if tc.npm != "" || tc.npmErr != nil {
				c.RunNPM = func() (string, error) { return tc.npm, tc.npmErr }
			}
			got, err := c.Resolve()
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.True(t, outposterr.Is(err, outposterr.Bootstrap), "%v", err)
				assert.Contains(t, err.Error(), tc.wantErr)
				assert.Contains(t, err.Error(), "NPM_CONFIG_REGISTRY")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRegistryFor(t *testing.T) {
	r := Registry{URL: "https://main.example/", Scopes: map[string]string{"@openai": "https://openai.example/"}}
	u, err := r.For("@openai/codex")
	require.NoError(t, err)
	assert.Equal(t, "https://openai.example/", u)
	u, err = r.For("@github/copilot-linux-x64")
	require.NoError(t, err)
	assert.Equal(t, "https://main.example/", u)
	_, err = Registry{Scopes: r.Scopes}.For("@github/copilot")
	assert.True(t, outposterr.Is(err, outposterr.Bootstrap))
}

func TestTarballURL(t *testing.T) {
	assert.Equal(t, "https://r.example/npm/@anthropic-ai/claude-code-linux-x64/-/claude-code-linux-x64-2.1.328.tgz",
		TarballURL("https://r.example/npm/", "@anthropic-ai/claude-code-linux-x64", "2.1.328"))
	assert.Equal(t, "https://r.example/@openai/codex/-/codex-0.169.0-linux-x64.tgz",
		TarballURL("https://r.example", "@openai/codex", "0.169.0-linux-x64"))
	assert.Equal(t, "https://r.example/left-pad/-/left-pad-1.3.0.tgz", TarballURL("https://r.example/", "left-pad", "1.3.0"))
}
