package gateway_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/outpost-dev/outpost/gateway"
	"github.com/outpost-dev/outpost/outposttest"
)

// Example runs one model request through a grant: the client presents only
// the placeholder, the upstream receives the real key, and the snapshot
// holds what the wire said.
func Example() {
	upstream, _ := outposttest.NewServer() // stands in for the provider
	defer upstream.Close()

	gw, _ := gateway.New(gateway.Options{Upstreams: []string{upstream.URL()}})
	defer gw.Close()
	base, _ := gw.ListenTCP("127.0.0.1:0") // a Docker lease would use ListenUnix and a forward

	g, _ := gw.Grant(gateway.GrantSpec{Label: "turn-1", Upstream: upstream.URL(),
		Credential: gateway.Credential{Scheme: gateway.SchemeAPIKey, Secret: "sk-real-key"}})
	ep := g.Endpoint(base) // what the CLI in the lease gets: base URL + placeholder

	req, _ := http.NewRequest(http.MethodPost, ep.BaseURL+"/v1/messages", strings.NewReader(
		`{"model":"claude-opus-5-5","max_tokens":64,"messages":[{"role":"user","content":"say MARK-1"}]}`))
	req.Header.Set("X-Api-Key", ep.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	g.Revoke()
	s := g.Snapshot()
	fmt.Println("statuses:", s.Statuses)
	fmt.Println("model:", s.Models)
	fmt.Println("usage measured:", s.Usage.Complete && s.Usage.Output > 0)
	fmt.Println("upstream got the real key:", upstream.Requests()[0].KeyFingerprint == outposttest.KeyFingerprint("sk-real-key"))
	fmt.Println("lease saw a placeholder:", strings.HasPrefix(ep.APIKey, gateway.PlaceholderPrefix))
	// Output:
	// statuses: [200]
	// model: [claude-opus-5-5]
	// usage measured: true
	// upstream got the real key: true
	// lease saw a placeholder: true
}
