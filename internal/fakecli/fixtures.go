package fakecli

import (
	"embed"
	"io/fs"
)

// Fixtures holds the fake's golden fixtures (testdata/<case>/…), so a test
// registers it in the agent registry like any agent.
//
//go:embed testdata
var Fixtures embed.FS

//go:embed store/testdata
var storeFixtures embed.FS

// StorageFixtures holds the golden fixtures of [NewStorage]'s adapter
// (testdata/<case>/…).
var StorageFixtures = func() fs.FS {
	sub, err := fs.Sub(storeFixtures, "store")
	if err != nil {
		panic(err)
	}
	return sub
}()
