package bootstrap

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A registry URL may carry basic-auth credentials (npm accepts
// registry=https://user:pass@host/, and NPM_CONFIG_REGISTRY is how CI sets
// one). They authenticate the download but never reach an error message or
// the cache's manifest.
func TestRegistryCredentialsNotShown(t *testing.T) {
	const pass = "s3cr3t-registry-pass"
	srv := newServer(t)
	cat, tgz := npmFixture(t, srv)
	withCreds := func() string {
		u, err := url.Parse(srv.URL + "/")
		require.NoError(t, err)
		u.User = url.UserPassword("ci", pass)
		return u.String()
	}()
	resolve := func() (Registry, error) {
		return NPMConfig{Getenv: func(k string) string {
			if k == "NPM_CONFIG_REGISTRY" {
				return withCreds
			}
			return ""
		}}.Resolve()
	}

	// A download that fails names the URL without the password.
	const tarball = "/@fake/tool/-/tool-3.1.4-linux-x64.tgz"
	srv.mu.Lock()
	delete(srv.files, tarball)
	srv.mu.Unlock()
	srv.put("/@fake%2ftool/3.1.4-linux-x64", []byte(`{"dist":{"tarball":"ftp://elsewhere/x.tgz"}}`))
	b := newBootstrapper(t, Options{Catalog: cat, Registry: resolve})
	_, err := b.Ensure(context.Background(), "tool")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")
	assert.NotContains(t, err.Error(), pass, "a failed download")

	// A digest mismatch names its source without the password.
	srv.put(tarball, []byte("not the pinned archive"))
	b = newBootstrapper(t, Options{Catalog: cat, Registry: resolve})
	_, err = b.Ensure(context.Background(), "tool")
	require.ErrorIs(t, err, ErrIntegrity)
	assert.NotContains(t, err.Error(), pass, "an integrity failure")

	// An install records its source without the password, and the
	// credentials still authenticated the request.
	srv.put(tarball, tgz)
	var gotPass string
	inner := srv.Config.Handler
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, p, ok := r.BasicAuth(); ok {
			gotPass = p
		}
		inner.ServeHTTP(w, r)
	})
	b = newBootstrapper(t, Options{Catalog: cat, Registry: resolve})
	e, err := b.Ensure(context.Background(), "tool")
	require.NoError(t, err)
	assert.Equal(t, pass, gotPass)
	assert.NotContains(t, e.Manifest.Source, pass)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(e.Dir), "manifest.json"))
	require.NoError(t, err)
	assert.NotContains(t, string(data), pass, "manifest.json")
	assert.True(t, strings.HasSuffix(e.Manifest.Source, tarball), e.Manifest.Source)
}

// A registry setting that is not an http(s) URL is named without the
// credentials it may hold.
func TestRegistrySettingErrorHidesCredentials(t *testing.T) {
	const pass = "s3cr3t-registry-pass"
	for _, v := range []string{
		"ftp://ci:" + pass + "@npm.example/",
		"ci:" + pass + "@npm.example/",
		"https://ci:" + pass + "%zz@npm.example/",
	} {
		t.Run(v, func(t *testing.T) {
			_, err := NPMConfig{Getenv: func(k string) string {
				if k == "NPM_CONFIG_REGISTRY" {
					return v
				}
				return ""
			}}.Resolve()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "not an http(s) URL")
			assert.NotContains(t, err.Error(), pass, fmt.Sprint(err))
		})
	}
}
