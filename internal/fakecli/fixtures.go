package fakecli

import "embed"

// Fixtures holds the fake's golden fixtures (testdata/<case>/…), so a test
// registers it in the agent registry like any agent.
//
//go:embed testdata
var Fixtures embed.FS
